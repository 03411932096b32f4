-- name: get_job
-- $1 job id.
select id, run_id, name, queue, state, tenant_id, idempotency_key, payload::text as payload,
       priority, attempt, max_attempts, dead_letter, claims, claimed_by, lease_until_ms, run_at_ms,
       created_at_ms, updated_at_ms, finished_at_ms, last_error, progress, enqueued_by, traceparent
from {schema}.jobs
where id = $1;

-- name: cancel
-- Fenced on the live states: a finished job is not cancelled twice. The cancel takes every live
-- descendant the job spawned along, but for a detached one (children.sql cancel_tree), deepest
-- first, and each cancelled child counts into its group in this statement. It bumps the minute
-- counter (cancelled) of each. Answers the job itself.
-- $1 now, $2 job id, $3 the error written.
with recursive params as (
    select coalesce($1::bigint, (extract(epoch from now()) * 1000)::bigint) as now_ms
),
cancel_error as (
    select $3::text as error
),
roots as (
    select j.id from {schema}.jobs j where j.id = $2 and j.state in ('ready', 'running', 'waiting')
),
{cancel_tree},
counted as (
    select c.name, 'cancelled' as outcome, c.now_ms from cancelled c
),
{count_minute}
select id, run_id, name, queue, state, tenant_id, idempotency_key, payload, priority, attempt,
       max_attempts, dead_letter, claims, claimed_by, lease_until_ms, run_at_ms, created_at_ms,
       updated_at_ms, finished_at_ms, last_error, progress, enqueued_by, traceparent
from cancelled
where id = $2;

-- name: requeue
-- One statement: a finished job whose namespace no live row holds goes back to ready with its
-- attempts reset. The claims counter is never reset, so an old claim stays fenced out. Its
-- result and a result waiter flag go: the job starts afresh.
-- $1 now, $2 job id.
update {schema}.jobs j
set state = 'ready', attempt = 0, run_at_ms = coalesce($1::bigint, (extract(epoch from now()) * 1000)::bigint),
    claimed_by = null, lease_until_ms = null, finished_at_ms = null, last_error = null,
    progress = null, result = null, watched = null,
    updated_at_ms = coalesce($1::bigint, (extract(epoch from now()) * 1000)::bigint)
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

-- name: promote
-- Makes a ready job (delayed or retrying) due now, and notifies its queue.
-- Answers nothing when the job is not ready: the driver reads why.
-- $1 now, $2 job id, $3 channel.
with params as (
    select coalesce($1::bigint, (extract(epoch from now()) * 1000)::bigint) as now_ms
),
promoted as (
    update {schema}.jobs j
    set run_at_ms = least(j.run_at_ms, p.now_ms), updated_at_ms = p.now_ms
    from params p
    where j.id = $2 and j.state = 'ready'
    returning j.id, j.run_id, j.name, j.queue, j.state, j.tenant_id, j.idempotency_key,
              j.payload::text as payload, j.priority, j.attempt, j.max_attempts, j.dead_letter,
              j.claims, j.claimed_by, j.lease_until_ms, j.run_at_ms, j.created_at_ms,
              j.updated_at_ms, j.finished_at_ms, j.last_error, j.progress, j.enqueued_by,
              j.traceparent
),
woken as (
    select pg_notify($3, p.queue) from promoted p
)
select id, run_id, name, queue, state, tenant_id, idempotency_key, payload, priority, attempt,
       max_attempts, dead_letter, claims, claimed_by, lease_until_ms, run_at_ms, created_at_ms,
       updated_at_ms, finished_at_ms, last_error, progress, enqueued_by, traceparent,
       (select count(*) from woken) as woken
from promoted;

-- name: remove
-- Deletes a finished job with its steps, attempt errors and event wait, and answers the job as
-- it was. Answers nothing when the job is live or unknown: the driver reads which.
-- $1 job id.
with gone as (
    delete from {schema}.jobs j
    where j.id = $1 and j.state in ('completed', 'failed', 'dead', 'cancelled')
    returning j.id, j.run_id, j.name, j.queue, j.state, j.tenant_id, j.idempotency_key,
              j.payload::text as payload, j.priority, j.attempt, j.max_attempts, j.dead_letter,
              j.claims, j.claimed_by, j.lease_until_ms, j.run_at_ms, j.created_at_ms,
              j.updated_at_ms, j.finished_at_ms, j.last_error, j.progress, j.enqueued_by,
              j.traceparent
),
{forget_removed}
select id, run_id, name, queue, state, tenant_id, idempotency_key, payload, priority, attempt,
       max_attempts, dead_letter, claims, claimed_by, lease_until_ms, run_at_ms, created_at_ms,
       updated_at_ms, finished_at_ms, last_error, progress, enqueued_by, traceparent
from gone;

-- fragment: forget_removed
-- The CTEs that delete what hangs off each job of the CTE gone (id, run_id): its steps, its
-- attempt errors and its event wait.
gone_steps as (
    delete from {schema}.steps s using gone g where s.run_id = g.run_id
),
gone_errors as (
    delete from {schema}.attempt_errors e using gone g where e.job_id = g.id
),
gone_waits as (
    delete from {schema}.event_waits w using gone g where w.job_id = g.id
)
