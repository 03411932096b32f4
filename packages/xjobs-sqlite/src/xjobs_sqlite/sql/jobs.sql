-- The enqueue, run for each row of a batch inside one BEGIN IMMEDIATE transaction: under the
-- file's write lock no other writer runs between a lookup and the insert that follows it, so
-- a row is inserted at most once and a namespace lookup cannot miss a row committed meanwhile.

-- name: insert_job
-- The fast path: insert unless the id names a job or a live row holds the namespace (either
-- unique index arbitrates, the conflict names no target). Answers the id when the row landed.
insert into jobs (id, run_id, name, queue, tenant_id, idempotency_key, payload, priority,
                  run_at_ms, max_attempts, dead_letter, enqueued_by, traceparent,
                  created_at_ms, updated_at_ms, throttle_until_ms)
values (:id, :run_id, :name, :queue, :tenant_id, :idempotency_key, :payload, :priority,
        :run_at_ms, :max_attempts, :dead_letter, :enqueued_by, :traceparent,
        :now, :now, :throttle_until_ms)
on conflict do nothing
returning id;

-- name: job_by_id
-- A repeated publish: the job the id already names, live or finished.
select id, run_id from jobs where id = :id;

-- name: live_in_namespace
-- The live job of a namespace (the expression and states of jobs_live_namespace).
select id, run_id from jobs
where name = :name and coalesce(tenant_id, '') = coalesce(:tenant_id, '')
  and idempotency_key = :idempotency_key and state in ('ready', 'running', 'waiting');

-- name: throttled_in_namespace
-- A throttled enqueue: the job of its namespace whose window is still open, live or finished.
select id, run_id from jobs
where name = :name and coalesce(tenant_id, '') = coalesce(:tenant_id, '')
  and idempotency_key = :idempotency_key and throttle_until_ms is not null
  and throttle_until_ms > :now
order by throttle_until_ms desc
limit 1;

-- name: debounce_live
-- A debounced enqueue: the live job of its namespace that no claim took yet (ready, claims 0)
-- takes this row's input and is due the window after now.
update jobs
set payload = :payload, enqueued_by = :enqueued_by, traceparent = :traceparent,
    run_at_ms = :now + :debounce_ms, updated_at_ms = :now
where name = :name and coalesce(tenant_id, '') = coalesce(:tenant_id, '')
  and idempotency_key = :idempotency_key and state in ('ready', 'running', 'waiting')
  and state = 'ready' and claims = 0
returning id, run_id;

-- name: get_job
select id, run_id, name, queue, state, tenant_id, idempotency_key, payload, priority, attempt,
       max_attempts, dead_letter, claims, claimed_by, lease_until_ms, run_at_ms, created_at_ms,
       updated_at_ms, finished_at_ms, last_error, progress, enqueued_by, traceparent
from jobs
where id = :id;
