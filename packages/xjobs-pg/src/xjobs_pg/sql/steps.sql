-- name: step_put
-- Writes one step, fenced like ack and nack on state running AND the claim (claimed_by,
-- claims): the job row is read for share, so a claim or settle in flight is waited out and the
-- fence is checked again on the row it left. A done row is never overwritten. A row comes back
-- only when the write landed.
-- $1 job id, $2 worker id, $3 claims, $4 run id, $5 name, $6 status, $7 result, $8 error,
-- $9 position, $10 created_at.
insert into {schema}.steps (run_id, name, status, result, error, position, created_at_ms)
select $4::uuid, $5, $6, $7, $8, $9, $10
from {schema}.jobs j
where j.id = $1 and j.state = 'running' and j.claimed_by = $2 and j.claims = $3
for share of j
on conflict (run_id, name) do update
set status = excluded.status, result = excluded.result, error = excluded.error,
    position = excluded.position, created_at_ms = excluded.created_at_ms
where {schema}.steps.status <> 'done'
returning run_id;

-- name: step_list
-- The one hydrate of a run: every step, by position, then name in code point order.
-- $1 run id.
select run_id, name, status, result, error, position, created_at_ms
from {schema}.steps
where run_id = $1
order by position, name collate "C";
