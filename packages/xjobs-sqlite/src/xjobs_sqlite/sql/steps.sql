-- Durable steps and results.

-- name: step_put
-- A step write, fenced like ack (state running and the claim), that never overwrites a done
-- record: a pending or error record of the name is replaced. Changes no row when it did not land.
insert into steps (run_id, name, status, result, error, position, created_at_ms)
select :run_id, :name, :status, :result, :error, :position, :created_at_ms
where exists (select 1 from jobs
              where id = :job_id and state = 'running' and claimed_by = :worker_id
                and claims = :claims)
on conflict (run_id, name) do update
set status = excluded.status, result = excluded.result, error = excluded.error,
    position = excluded.position, created_at_ms = excluded.created_at_ms
where steps.status <> 'done';

-- name: step_list
select run_id, name, status, result, error, position, created_at_ms
from steps
where run_id = :run_id
order by position, name;

-- name: result_read
select state, result, last_error from jobs where id = :id;
