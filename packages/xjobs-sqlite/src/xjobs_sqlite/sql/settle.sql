-- Every settle is fenced on state running AND the claim (claimed_by, claims): a write from a
-- worker whose claim moved on updates nothing, and the driver reports that it did not land.

-- name: ack
-- Completes the run (storing the body's result, null for none) and answers its name, for the
-- minute counter the same transaction bumps, and its group (null: not a child), which the same
-- transaction resolves when it is the last child of one (children.sql child_endings).
update jobs
set state = 'completed', lease_until_ms = null, finished_at_ms = :now, updated_at_ms = :now,
    result = :result
where id = :job_id and state = 'running' and claimed_by = :worker_id and claims = :claims
returning name, parent_run_id;

-- name: ack_many
-- Completes a batch of runs (no result) in one statement, each fenced on its own claim:
-- :claims is a JSON array of [job id, worker id, claims]. Answers each completed job's id,
-- name and group (null: not a child). One statement, not one a run: every statement the writer
-- thread runs hands the GIL back and waits to take it again from a busy event loop, so a batch of
-- ten settled one by one spent most of its time waiting (3.6 ms a batch, against 0.5 ms).
update jobs
set state = 'completed', lease_until_ms = null, finished_at_ms = :now, updated_at_ms = :now,
    result = null
from (
    select json_extract(value, '$[0]') as job_id, json_extract(value, '$[1]') as worker_id,
           json_extract(value, '$[2]') as claims
    from json_each(:claims)
) as settled
where jobs.id = settled.job_id and jobs.state = 'running'
  and jobs.claimed_by = settled.worker_id and jobs.claims = settled.claims
returning jobs.id, jobs.name, jobs.parent_run_id;

-- name: nack
-- Stores the Nack the settle room decided, as handed: nothing here derives a state. A terminal
-- state keeps run_at and sets finished_at, a hand-back (:handback 1) returns the attempt.
-- Answers the name and the attempt the claim counted, for the error and the counter.
update jobs
set state = :state,
    run_at_ms = case when :terminal then run_at_ms else coalesce(:run_at_ms, :now) end,
    attempt = max(attempt - :handback, 0),
    last_error = case when :writes_error then :error else last_error end,
    finished_at_ms = case when :terminal then :now else null end,
    lease_until_ms = null,
    updated_at_ms = :now
where id = :job_id and state = 'running' and claimed_by = :worker_id and claims = :claims
returning name, attempt + :handback as attempt;

-- name: heartbeat
update jobs
set lease_until_ms = :now + :lease_ms, updated_at_ms = :now
where id = :job_id and state = 'running' and claimed_by = :worker_id and claims = :claims;

-- name: record_progress
update jobs
set progress = :progress, updated_at_ms = :now
where id = :job_id and state = 'running' and claimed_by = :worker_id and claims = :claims;
