-- The backfill ledger, keyed by run: every write names its run.

-- name: backfill_begin
-- A run starts (again, on a retry): a new row is running; a row that exists keeps its cursor,
-- count and batches, and loses its error and finish.
insert into backfills (run_id, job_id, name, checksum, environment, tenant, status,
                       started_at_ms, updated_at_ms)
values (:run_id, :job_id, :name, :checksum, :environment, :tenant, 'running', :now, :now)
on conflict (run_id) do update
set status = 'running', error = null, finished_at_ms = null, updated_at_ms = excluded.updated_at_ms;

-- name: backfill_checkpoint
update backfills set cursor = :cursor, count = :count, batches = :batches, updated_at_ms = :now
where run_id = :run_id and status = 'running';

-- name: backfill_finish
update backfills set status = :status, error = :error, updated_at_ms = :now, finished_at_ms = :now
where run_id = :run_id;

-- name: backfill_get
select run_id, job_id, name, checksum, environment, tenant, status, cursor, count, batches, error,
       started_at_ms, updated_at_ms, finished_at_ms
from backfills
where run_id = :run_id;

-- name: backfill_rows
select run_id, job_id, name, checksum, environment, tenant, status, cursor, count, batches, error,
       started_at_ms, updated_at_ms, finished_at_ms
from backfills
where :name is null or name = :name
order by started_at_ms desc, run_id
limit :limit;

-- name: backfill_completed
select run_id, job_id, name, checksum, environment, tenant, status, cursor, count, batches, error,
       started_at_ms, updated_at_ms, finished_at_ms
from backfills
where status = 'completed' and name = :name and checksum = :checksum
  and environment = :environment and tenant is :tenant
order by finished_at_ms, run_id
limit 1;
