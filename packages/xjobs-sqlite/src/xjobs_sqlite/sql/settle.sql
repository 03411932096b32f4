-- Every settle is fenced on state running AND the claim (claimed_by, claims): a write from a
-- worker whose claim moved on updates nothing, and the driver reports that it did not land.

-- name: ack
-- Completes the run (storing the body's result, null for none) and answers its name, for the
-- minute counter the same transaction bumps.
update jobs
set state = 'completed', lease_until_ms = null, finished_at_ms = :now, updated_at_ms = :now,
    result = :result
where id = :job_id and state = 'running' and claimed_by = :worker_id and claims = :claims
returning name;

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
