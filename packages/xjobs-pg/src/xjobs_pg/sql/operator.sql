-- name: get_job
-- $1 job id.
select id, run_id, name, queue, state, tenant_id, idempotency_key, payload::text as payload,
       priority, attempt, max_attempts, dead_letter, claims, claimed_by, lease_until_ms, run_at_ms,
       created_at_ms, updated_at_ms, finished_at_ms, last_error, progress, enqueued_by, traceparent
from {schema}.jobs
where id = $1;

-- name: cancel
-- Fenced on the live states: a finished job is not cancelled twice.
-- $1 now, $2 job id, $3 the error written.
update {schema}.jobs
set state = 'cancelled', lease_until_ms = null, last_error = $3,
    finished_at_ms = coalesce($1::bigint, (extract(epoch from now()) * 1000)::bigint),
    updated_at_ms = coalesce($1::bigint, (extract(epoch from now()) * 1000)::bigint)
where id = $2 and state in ('ready', 'running', 'waiting')
returning id, run_id, name, queue, state, tenant_id, idempotency_key, payload::text as payload,
          priority, attempt, max_attempts, dead_letter, claims, claimed_by, lease_until_ms,
          run_at_ms, created_at_ms, updated_at_ms, finished_at_ms, last_error, progress,
          enqueued_by, traceparent;

-- name: requeue
-- One statement: a finished job whose namespace no live row holds goes back to ready with its
-- attempts reset. The claims counter is never reset, so an old claim stays fenced out.
-- $1 now, $2 job id.
update {schema}.jobs j
set state = 'ready', attempt = 0, run_at_ms = coalesce($1::bigint, (extract(epoch from now()) * 1000)::bigint),
    claimed_by = null, lease_until_ms = null, finished_at_ms = null, last_error = null,
    progress = null, updated_at_ms = coalesce($1::bigint, (extract(epoch from now()) * 1000)::bigint)
where j.id = $2 and j.state in ('completed', 'failed', 'dead', 'cancelled')
  and not exists (
      select 1 from {schema}.jobs live
      where live.name = j.name and coalesce(live.tenant_id, '') = coalesce(j.tenant_id, '')
        and live.idempotency_key = j.idempotency_key
        and live.state in ('ready', 'running', 'waiting'))
returning id, run_id, name, queue, state, tenant_id, idempotency_key, payload::text as payload,
          priority, attempt, max_attempts, dead_letter, claims, claimed_by, lease_until_ms,
          run_at_ms, created_at_ms, updated_at_ms, finished_at_ms, last_error, progress,
          enqueued_by, traceparent;

-- name: live_holder
-- $1 job id.
select live.id
from {schema}.jobs j
join {schema}.jobs live
  on live.name = j.name and coalesce(live.tenant_id, '') = coalesce(j.tenant_id, '')
 and live.idempotency_key = j.idempotency_key and live.state in ('ready', 'running', 'waiting')
where j.id = $1
limit 1;

-- name: requeue_many
-- Eligible rows: finished, matching the filter, one per namespace (the oldest), and no live row
-- holding that namespace. Moves the oldest $5 of them and reports what is left to move.
-- $1 now, $2 states, $3 queue (null: any), $4 job name (null: any), $5 limit.
with params as (
    select coalesce($1::bigint, (extract(epoch from now()) * 1000)::bigint) as now_ms
),
eligible as (
    select distinct on (j.name, coalesce(j.tenant_id, ''), j.idempotency_key)
           j.id, j.created_at_ms
    from {schema}.jobs j
    where j.state = any($2::text[])
      and ($3::text is null or j.queue = $3)
      and ($4::text is null or j.name = $4)
      and not exists (
          select 1 from {schema}.jobs live
          where live.name = j.name and coalesce(live.tenant_id, '') = coalesce(j.tenant_id, '')
            and live.idempotency_key = j.idempotency_key
            and live.state in ('ready', 'running', 'waiting'))
    order by j.name, coalesce(j.tenant_id, ''), j.idempotency_key, j.created_at_ms, j.id
),
picked as (
    select e.id from eligible e order by e.created_at_ms, e.id limit $5
),
moved as (
    update {schema}.jobs j
    set state = 'ready', attempt = 0, run_at_ms = p.now_ms, claimed_by = null,
        lease_until_ms = null, finished_at_ms = null, last_error = null, progress = null,
        updated_at_ms = p.now_ms
    from params p
    where j.id in (select id from picked)
    returning j.id
)
select (select count(*) from moved) as moved,
       (select count(*) from eligible) - (select count(*) from moved) as remaining;
