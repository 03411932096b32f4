-- The settles' bookkeeping, run in the settling transaction: each attempt error a settle
-- stores, and the minute counter of each counted ending.

-- name: keep_error
-- One error per claim (the claim count is the key). 
insert into attempt_errors (job_id, claims, attempt, worker_id, at_ms, error)
values (:job_id, :claims, :attempt, :worker_id, :now, :error)
on conflict (job_id, claims) do nothing;

-- name: drop_old_errors
-- Keep the newest 25 errors of a job (MAX_ERROR_HISTORY).
delete from attempt_errors
where job_id = :job_id
  and claims <= (select o.claims from attempt_errors o where o.job_id = :job_id
                 order by o.claims desc limit 1 offset 25);

-- name: count_minute
-- The minute bucket of an ending (60000 is MINUTE_MS).
insert into counters (tier, bucket_ms, name, outcome, count)
values ('minute', :now - :now % 60000, :name, :outcome, :n)
on conflict (tier, bucket_ms, name, outcome) do update set count = count + excluded.count;
