-- The backfill ledger (the backfills table): one row per run of a sweep, what it SWEPT. Every
-- statement takes the clock as $1 (null: the server clock). No statement returns a whole row.

-- fragment: backfill_now
coalesce($1::bigint, (extract(epoch from clock_timestamp()) * 1000)::bigint)

-- fragment: backfill_columns
run_id, job_id, name, checksum, environment, tenant, status, cursor, count, batches, error,
started_at_ms, updated_at_ms, finished_at_ms

-- name: backfill_begin
-- A run starts (or starts again on a retry): a new row is running at zero, a row that exists
-- keeps its cursor, count and batches and loses its error and finish.
-- $1 now, $2 run id, $3 job id, $4 name, $5 checksum, $6 environment, $7 tenant.
insert into {schema}.backfills
    (run_id, job_id, name, checksum, environment, tenant, status, started_at_ms, updated_at_ms)
values ($2, $3, $4, $5, $6, $7, 'running', {backfill_now}, {backfill_now})
on conflict (run_id) do update
set status = 'running', error = null, finished_at_ms = null, updated_at_ms = excluded.updated_at_ms;

-- name: backfill_checkpoint
-- The position after a batch that ran: absolute values, so a repeated write counts nothing
-- twice. Only a running row moves.
-- $1 now, $2 run id, $3 cursor JSON, $4 count, $5 batches.
update {schema}.backfills
set cursor = $3, count = $4, batches = $5, updated_at_ms = {backfill_now}
where run_id = $2 and status = 'running'
returning run_id;

-- name: backfill_finish
-- Settle a run completed or failed, with its error.
-- $1 now, $2 run id, $3 status, $4 error.
update {schema}.backfills
set status = $3, error = $4, updated_at_ms = {backfill_now}, finished_at_ms = {backfill_now}
where run_id = $2
returning run_id;

-- name: backfill_get
-- $1 run id.
select {backfill_columns}
from {schema}.backfills
where run_id = $1;

-- name: backfill_rows
-- Newest start first, then run id, one sweep when $1 is not null. $2 the bound.
select {backfill_columns}
from {schema}.backfills
where $1::text is null or name = $1
order by started_at_ms desc, run_id collate "C"
limit $2;

-- name: backfill_completed
-- The verdict: the earliest completed run of a declaration in an environment for a tenant
-- (null: a cross-tenant sweep).
-- $1 name, $2 checksum, $3 environment, $4 tenant.
select {backfill_columns}
from {schema}.backfills
where status = 'completed' and name = $1 and checksum = $2 and environment = $3
  and tenant is not distinct from $4
order by finished_at_ms, run_id collate "C"
limit 1;
