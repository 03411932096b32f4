-- name: worker_announce
-- Writes the row of this worker and sweeps rows that expired, in one statement.
-- $1 now, $2 id, $3 host, $4 pid, $5 queues, $6 started, $7 TTL ms.
with params as (
    select coalesce($1::bigint, (extract(epoch from now()) * 1000)::bigint) as now_ms
),
swept as (
    delete from {schema}.workers w using params p where w.expires_at_ms <= p.now_ms returning w.id
)
insert into {schema}.workers (id, host, pid, queues, started_at_ms, last_seen_ms, expires_at_ms)
select $2, $3, $4, $5::text[], $6, p.now_ms, p.now_ms + $7::bigint from params p
on conflict (id) do update
set host = excluded.host, pid = excluded.pid, queues = excluded.queues,
    started_at_ms = excluded.started_at_ms, last_seen_ms = excluded.last_seen_ms,
    expires_at_ms = excluded.expires_at_ms;

-- name: worker_beat
-- $1 now, $2 id, $3 TTL ms.
update {schema}.workers
set last_seen_ms = coalesce($1::bigint, (extract(epoch from now()) * 1000)::bigint),
    expires_at_ms = coalesce($1::bigint, (extract(epoch from now()) * 1000)::bigint) + $3::bigint
where id = $2 and expires_at_ms > coalesce($1::bigint, (extract(epoch from now()) * 1000)::bigint);

-- name: worker_forget
-- $1 id.
delete from {schema}.workers where id = $1;

-- name: worker_list
-- $1 now.
select id, host, pid, queues, started_at_ms, last_seen_ms
from {schema}.workers
where expires_at_ms > coalesce($1::bigint, (extract(epoch from now()) * 1000)::bigint)
order by id;

-- name: slot_lock
-- Serialises acquirers of one key for the rest of the transaction, so the count and the insert
-- of slot_acquire cannot race another acquirer.
-- $1 key.
select pg_advisory_xact_lock(hashtextextended($1, 0));

-- name: slot_acquire
-- Takes a slot unless $4 unexpired holders have one already, where the slot of the holder
-- itself counts once.
-- $1 now, $2 key, $3 job id, $4 limit, $5 claims, $6 TTL ms.
with params as (
    select coalesce($1::bigint, (extract(epoch from now()) * 1000)::bigint) as now_ms
),
swept as (
    delete from {schema}.slots l using params p
    where l.key = $2 and l.expires_at_ms <= p.now_ms and not (l.job_id = $3 and l.claims = $5)
    returning l.job_id
),
held as (
    select count(*) filter (where not (l.job_id = $3 and l.claims = $5)) as others,
           count(*) filter (where l.job_id = $3 and l.claims = $5) as mine
    from {schema}.slots l, params p
    where l.key = $2 and l.expires_at_ms > p.now_ms
)
insert into {schema}.slots (key, job_id, claims, expires_at_ms)
select $2, $3, $5, p.now_ms + $6::bigint
from params p, held h
where $4::int > 0 and (h.mine > 0 or h.others < $4::int)
on conflict (key, job_id, claims) do update set expires_at_ms = excluded.expires_at_ms
returning key;

-- name: slot_renew
-- $1 now, $2 key, $3 job id, $4 claims, $5 TTL ms.
update {schema}.slots
set expires_at_ms = coalesce($1::bigint, (extract(epoch from now()) * 1000)::bigint) + $5::bigint
where key = $2 and job_id = $3 and claims = $4
  and expires_at_ms > coalesce($1::bigint, (extract(epoch from now()) * 1000)::bigint);

-- name: slot_release
-- $1 now, $2 key, $3 job id, $4 claims.
delete from {schema}.slots
where key = $2 and job_id = $3 and claims = $4
  and expires_at_ms > coalesce($1::bigint, (extract(epoch from now()) * 1000)::bigint);

-- name: slot_holders
-- $1 now, $2 key.
select job_id, claims
from {schema}.slots
where key = $2 and expires_at_ms > coalesce($1::bigint, (extract(epoch from now()) * 1000)::bigint)
order by job_id, claims;

-- name: wake_probe
-- The probe that proves the listening session receives what another session notifies.
-- $1 channel, $2 payload.
select pg_notify($1, $2);

-- name: installed_version
select version from {schema}.schema_version;
