-- The operator moves of the driver contract: cancel and requeue.

-- name: cancel
-- Fenced on the live states: a finished job is not cancelled twice.
update jobs
set state = 'cancelled', lease_until_ms = null, last_error = :error, finished_at_ms = :now,
    updated_at_ms = :now
where id = :id and state in ('ready', 'running', 'waiting')
returning id, run_id, name, queue, state, tenant_id, idempotency_key, payload, priority, attempt,
          max_attempts, dead_letter, claims, claimed_by, lease_until_ms, run_at_ms, created_at_ms,
          updated_at_ms, finished_at_ms, last_error, progress, enqueued_by, traceparent;

-- name: requeue
-- One statement: a finished job whose namespace no live row holds goes back to ready with its
-- attempts reset. claims is never reset, so an old claim stays fenced out. Its result goes.
update jobs
set state = 'ready', attempt = 0, run_at_ms = :now, claimed_by = null, lease_until_ms = null,
    finished_at_ms = null, last_error = null, progress = null, result = null, updated_at_ms = :now
where id = :id and state in ('completed', 'failed', 'dead', 'cancelled')
  and not exists (
      select 1 from jobs live
      where live.name = jobs.name and coalesce(live.tenant_id, '') = coalesce(jobs.tenant_id, '')
        and live.idempotency_key = jobs.idempotency_key
        and live.state in ('ready', 'running', 'waiting'))
returning id, run_id, name, queue, state, tenant_id, idempotency_key, payload, priority, attempt,
          max_attempts, dead_letter, claims, claimed_by, lease_until_ms, run_at_ms, created_at_ms,
          updated_at_ms, finished_at_ms, last_error, progress, enqueued_by, traceparent;

-- name: live_holder
-- The live job holding the namespace of job :id.
select live.id
from jobs j
join jobs live
  on live.name = j.name and coalesce(live.tenant_id, '') = coalesce(j.tenant_id, '')
 and live.idempotency_key = j.idempotency_key and live.state in ('ready', 'running', 'waiting')
where j.id = :id
limit 1;
