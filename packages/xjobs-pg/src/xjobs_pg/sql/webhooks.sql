-- The webhook ledger (webhook_endpoints, webhook_attempts): the state of each endpoint and its newest
-- attempts. An attempt carries its own instant (the clock of the factory). No statement returns a
-- whole row.

-- name: webhook_record
-- One attempt in one statement: the endpoint row moves (its sequence, its run of failures, and
-- its disablement once the run reaches $11), the attempt is appended under the new sequence,
-- and the attempts of the endpoint older than the newest $12 are deleted. A delivery ends the run, a
-- failed or rejected attempt extends it, a skipped one leaves it, a disabled endpoint stays so.
-- $1 endpoint, $2 message id, $3 job id, $4 attempt, $5 status, $6 http status, $7 latency ms,
-- $8 excerpt, $9 error, $10 at ms, $11 disable after, $12 keep.
with moved as (
    insert into {schema}.webhook_endpoints as e (endpoint, seq, failures, disabled_at_ms)
    select $1::text, 1, f.failures,
           case when $5::text in ('failed', 'rejected') and f.failures >= $11::integer
                then $10::bigint end
    from (select case when $5::text in ('failed', 'rejected') then 1 else 0 end as failures) f
    on conflict (endpoint) do update
    set seq = e.seq + 1,
        failures = case when $5::text = 'delivered' then 0
                        when $5::text in ('failed', 'rejected') then e.failures + 1
                        else e.failures end,
        disabled_at_ms = case when e.disabled_at_ms is not null then e.disabled_at_ms
                              when $5::text in ('failed', 'rejected')
                                   and e.failures + 1 >= $11::integer then $10::bigint end
    returning e.endpoint, e.seq, e.failures, e.disabled_at_ms
),
appended as (
    insert into {schema}.webhook_attempts
        (endpoint, seq, message_id, job_id, attempt, status, http_status, latency_ms, excerpt,
         error, at_ms)
    select m.endpoint, m.seq, $2::text, $3::text, $4::integer, $5::text, $6::integer,
           $7::bigint, $8::text, $9::text, $10::bigint
    from moved m
),
trimmed as (
    delete from {schema}.webhook_attempts a using moved m
    where a.endpoint = m.endpoint and a.seq <= m.seq - $12::bigint
)
select failures, disabled_at_ms from moved;

-- name: webhook_state
-- $1 endpoint.
select failures, disabled_at_ms from {schema}.webhook_endpoints where endpoint = $1;

-- name: webhook_enable
-- The endpoint enabled again, its run of failures ended, answers whether it was disabled.
-- $1 endpoint.
with prior as (
    select endpoint, disabled_at_ms from {schema}.webhook_endpoints where endpoint = $1 for update
)
update {schema}.webhook_endpoints e
set failures = 0, disabled_at_ms = null
from prior
where e.endpoint = prior.endpoint
returning prior.disabled_at_ms is not null as was_disabled;

-- name: webhook_attempts
-- The attempts of an endpoint, newest first. $1 endpoint, $2 limit.
select message_id, job_id, attempt, status, http_status, latency_ms, excerpt, error, at_ms
from {schema}.webhook_attempts
where endpoint = $1
order by seq desc
limit $2;
