-- The operator's reads: each walks jobs_listed one queue and one state at a time, so a page or
-- a count reads a bounded number of index entries whatever the table holds.

-- name: known_queues
-- Every queue with a job, by a loose scan of jobs_listed (one descent a queue), and every
-- paused queue.
with recursive q(name) as (
    select min(queue) from jobs
    union all
    select (select min(j.queue) from jobs j where j.queue > q.name) from q where q.name is not null
)
select name from q where name is not null
union
select name from pauses where kind = 'queue'
order by 1;

-- name: list_newest
-- One queue and state of a list page: newest first, strictly older than (:before_ms, :before_id)
-- when given, every other filter applied on the way.
select id, name, queue, state, tenant_id, priority, attempt, max_attempts, run_at_ms,
       created_at_ms, updated_at_ms, finished_at_ms, claimed_by, progress, last_error
from jobs
where queue = :queue and state = :state
  and (:before_ms is null or (created_at_ms, id) < (:before_ms, :before_id))
  and (:name is null or name = :name)
  and (:tenant is null or tenant_id = :tenant)
  and (:created_after_ms is null or created_at_ms > :created_after_ms)
  and (:created_before_ms is null or created_at_ms < :created_before_ms)
order by created_at_ms desc, id desc
limit :limit;

-- name: list_oldest
-- One queue and state of a bulk verb's batch: oldest first, every other filter applied.
select id, created_at_ms, name, tenant_id, idempotency_key, run_at_ms
from jobs
where queue = :queue and state = :state
  and (:name is null or name = :name)
  and (:tenant is null or tenant_id = :tenant)
  and (:created_after_ms is null or created_at_ms > :created_after_ms)
  and (:created_before_ms is null or created_at_ms < :created_before_ms)
  and (:due_after is null or run_at_ms > :due_after)
order by created_at_ms, id
limit :limit;

-- name: count_state
-- A queue's count of one state, stopped at :cap.
select count(*) from (select 1 from jobs where queue = :queue and state = :state limit :cap);

-- name: count_scheduled
-- A queue's ready jobs due after now (delayed or retrying), stopped at :cap.
select count(*) from (
    select 1 from jobs where queue = :queue and state = 'ready' and run_at_ms > :now limit :cap);

-- name: count_due
-- A queue's ready jobs due now, stopped at :cap: read from jobs_claimable one priority at a time
-- (as the claim reads them), run_at a bound of each range, so delayed jobs are never walked.
-- (indexed by: jobs_listed matches queue and state as equalities, and would walk every ready job)
select count(*) from (
    select 1 from jobs j indexed by jobs_claimable
    where j.queue = :queue and j.state in ('ready', 'waiting') and j.state = 'ready'
      and j.run_at_ms <= :now
      and j.priority in (
          with recursive levels(priority) as (
              select min(l.priority) from jobs l
              where l.queue = :queue and l.state in ('ready', 'waiting')
              union all
              select (select min(l.priority) from jobs l
                      where l.queue = :queue and l.state in ('ready', 'waiting')
                        and l.priority > levels.priority)
              from levels where levels.priority is not null
          )
          select priority from levels where priority is not null)
    limit :cap);

-- name: oldest_due
-- The run_at of the longest-due ready job of a queue, or null: the first due entry of each
-- priority's range of jobs_claimable (a waiting job there is passed over).
with recursive levels(priority) as (
    select min(l.priority) from jobs l where l.queue = :queue and l.state in ('ready', 'waiting')
    union all
    select (select min(l.priority) from jobs l
            where l.queue = :queue and l.state in ('ready', 'waiting')
              and l.priority > levels.priority)
    from levels where levels.priority is not null
)
select min((select j.run_at_ms from jobs j indexed by jobs_claimable
            where j.queue = :queue and j.state in ('ready', 'waiting') and j.state = 'ready'
              and j.priority = levels.priority and j.run_at_ms <= :now
            order by j.run_at_ms
            limit 1))
from levels
where levels.priority is not null;

-- name: attempt_errors
select job_id, attempt, worker_id, at_ms, error
from attempt_errors
where job_id = :job_id
order by claims;

-- name: counter_buckets
select bucket_ms, name, outcome, count
from counters
where tier = :tier and bucket_ms >= :since and count > 0
order by bucket_ms, name, outcome;

-- name: pause_rows
select kind, name, paused_at_ms from pauses order by kind, name;
