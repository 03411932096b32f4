-- The operator's writes beyond the driver contract: pauses, promote, remove, the counter rollup.

-- name: pause
insert into pauses (kind, name, paused_at_ms) values (:kind, :name, :now)
on conflict (kind, name) do nothing;

-- name: resume
delete from pauses where kind = :kind and name = :name;

-- name: promote
-- A ready job (delayed or retrying) due now.
update jobs set run_at_ms = min(run_at_ms, :now), updated_at_ms = :now
where id = :id and state = 'ready'
returning id, run_id, name, queue, state, tenant_id, idempotency_key, payload, priority, attempt,
          max_attempts, dead_letter, claims, claimed_by, lease_until_ms, run_at_ms, created_at_ms,
          updated_at_ms, finished_at_ms, last_error, progress, enqueued_by, traceparent;

-- name: remove
-- A finished job, deleted (its steps and errors by the statements that follow).
delete from jobs
where id = :id and state in ('completed', 'failed', 'dead', 'cancelled')
returning id, run_id, name, queue, state, tenant_id, idempotency_key, payload, priority, attempt,
          max_attempts, dead_letter, claims, claimed_by, lease_until_ms, run_at_ms, created_at_ms,
          updated_at_ms, finished_at_ms, last_error, progress, enqueued_by, traceparent;

-- name: remove_steps
delete from steps where run_id = :run_id;

-- name: remove_errors
delete from attempt_errors where job_id = :job_id;

-- name: remove_groups
-- The child groups a removed job's run spawned (found by their key's first column).
delete from child_groups where parent_run_id = :run_id;

-- name: unfolded_minutes
-- The closed minute buckets not folded yet.
select distinct bucket_ms from counters
where tier = 'minute' and bucket_ms < :current
  and bucket_ms not in (select bucket_ms from counter_folds)
order by bucket_ms;

-- name: fold_minute
-- One minute bucket into its hour (3600000 ms) or its day (86400000 ms), :size the tier's.
insert into counters (tier, bucket_ms, name, outcome, count)
select :tier, bucket_ms - bucket_ms % :size, name, outcome, count
from counters
where tier = 'minute' and bucket_ms = :bucket
on conflict (tier, bucket_ms, name, outcome) do update set count = count + excluded.count;

-- name: mark_folded
insert into counter_folds (bucket_ms, folded_at_ms) values (:bucket, :now);
