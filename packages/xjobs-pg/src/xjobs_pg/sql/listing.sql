-- What an operator reads: a page of jobs, the attempt errors of a job, and the counts of each queue.
-- Every read of jobs here goes through jobs_listed (queue, state, created_at_ms, id), one queue
-- and one state at a time, so a page or a count costs what it returns, not the size of the table.
-- A statement that takes a JobFilter binds it first: $1 states, $2 queue (null: every known
-- queue), $3 job name (null: any), $4 tenant (null: any), $5 and $6 the created range, exclusive
-- at both ends (the driver binds the open ends as the extremes of bigint, so the range stays an
-- index condition and never becomes an or).

-- fragment: filter_queues
-- The queues a filter reads: $2, or with a null every queue that has jobs, found by a loose scan
-- of the first column of jobs_listed (one index descent a queue, never a read of every row).
-- A row with a null queue ends the walk, so a reader skips it.
filter_queues(queue) as (
    select coalesce($2::text, (select min(j.queue) from {schema}.jobs j))
    union all
    select (select min(j.queue) from {schema}.jobs j where j.queue > f.queue)
    from filter_queues f
    where $2::text is null and f.queue is not null
)

-- fragment: filter_match
-- The rest of a filter on a row j of one queue and one state: the created range, the name and
-- the tenant.
j.created_at_ms > $5::bigint and j.created_at_ms < $6::bigint
          and ($3::text is null or j.name = $3) and ($4::text is null or j.tenant_id = $4)

-- name: index_scans_only
-- Run first, in the transaction of a read that counts to a cap (queue_counts, the bulk verbs).
-- The planner reads the selectivity of a run_at range or of a state from the whole table, where
-- finished rows dominate, so it can misjudge a capped count as small or a due range as large,
-- and take a bitmap or a sequential scan, which reads every matching row (or the table) before
-- the limit. With both off for the transaction, each count is an index scan in index order
-- that stops at its cap. A disabled plan is costed so high that it would set off the JIT
-- compiler (a second of compiling for a read of milliseconds), so the JIT is off too. The read
-- keeps one generic plan per connection: planning it afresh against the statistics of a large table
-- cost more than running it (1.2 ms of planning for 0.3 ms of counting beside 1,000,000 rows),
-- and with the scans above off every plan of it is the same index walk.
select set_config('enable_bitmapscan', 'off', true) as bitmapscan,
       set_config('enable_seqscan', 'off', true) as seqscan,
       set_config('jit', 'off', true) as jit,
       set_config('plan_cache_mode', 'force_generic_plan', true) as plan_cache_mode;

-- name: list_jobs
-- Up to $9 jobs matching the filter, newest first by (created_at, id), strictly older than the
-- position ($7, $8, the extremes for a first page). Each queue and state is one backward
-- scan of jobs_listed from the position, at most $9 rows, and only those rows are sorted.
-- $1..$6 the filter, $7 created_at and $8 id of the position, $9 the limit.
with recursive {filter_queues}
select x.id, x.name, x.queue, x.state, x.tenant_id, x.priority, x.attempt, x.max_attempts,
       x.run_at_ms, x.created_at_ms, x.updated_at_ms, x.finished_at_ms, x.claimed_by, x.progress,
       x.last_error
from filter_queues f
cross join unnest($1::text[]) as s(state)
cross join lateral (
    select j.id, j.name, j.queue, j.state, j.tenant_id, j.priority, j.attempt, j.max_attempts,
           j.run_at_ms, j.created_at_ms, j.updated_at_ms, j.finished_at_ms, j.claimed_by,
           j.progress, j.last_error
    from {schema}.jobs j
    where j.queue = f.queue and j.state = s.state
      and (j.created_at_ms, j.id) < ($7::bigint, $8::uuid)
      and {filter_match}
    order by j.created_at_ms desc, j.id desc
    limit $9
) x
where f.queue is not null
order by x.created_at_ms desc, x.id desc
limit $9;

-- name: job_errors
-- The stored attempt errors of a job, oldest first.
-- $1 job id.
select job_id, attempt, worker_id, at_ms, error
from {schema}.attempt_errors
where job_id = $1
order by claims;

-- name: queue_counts
-- Every known queue (one with jobs, by the loose scan of jobs_listed, or a queue pause) with
-- its counts, each a scan that stops at $2 (COUNT_CAP): running, waiting, dead and failed read
-- jobs_listed in one queue and state. Ready (due now), scheduled (ready, due later) and the
-- oldest due run_at read jobs_claimable, one range of run_at in each priority of the queue (the
-- priorities found by a loose scan of its second column), so neither a million finished rows nor
-- a million delayed ones are read to count what is due. Each count scan is ordered by its index
-- so the planner takes an index scan that stops at the cap, never a bitmap that reads it all.
-- Scheduled is the ready rows less the due ones: an index-only scan of jobs_listed in the queue
-- and the ready state (the state is in the index, so no heap row is read once the table is vacuumed)
-- counts up to the due count plus the cap, and takes the due count off. A queue whose due count
-- reached the cap (where that difference would be inexact) counts scheduled as before, through
-- jobs_claimable and the heap.
-- $1 now, $2 the cap.
with recursive known(queue) as (
    select min(j.queue) from {schema}.jobs j
    union all
    select (select min(j.queue) from {schema}.jobs j where j.queue > k.queue)
    from known k
    where k.queue is not null
),
named as (
    select k.queue from known k where k.queue is not null
    union
    select p.name from {schema}.pauses p where p.kind = 'queue'
),
priorities(queue, priority) as (
    select n.queue,
           (select min(j.priority) from {schema}.jobs j
            where j.queue = n.queue and j.state in ('ready', 'waiting'))
    from named n
    union all
    select r.queue,
           (select min(j.priority) from {schema}.jobs j
            where j.queue = r.queue and j.state in ('ready', 'waiting') and j.priority > r.priority)
    from priorities r
    where r.priority is not null
)
select n.queue,
       due.ready,
       case when due.ready < $2
            then (select count(*) from (select 1 from {schema}.jobs j
                                        where j.queue = n.queue and j.state = 'ready'
                                        order by j.created_at_ms
                                        limit due.ready + $2) c) - due.ready
            else (select count(*) from (
                      select 1
                      from priorities r
                      cross join lateral (
                          select 1 from {schema}.jobs j
                          where j.queue = r.queue and j.state in ('ready', 'waiting')
                            and j.priority = r.priority and j.run_at_ms > $1::bigint
                            and j.state = 'ready'
                          order by j.run_at_ms
                          limit $2
                      ) d
                      where r.queue = n.queue and r.priority is not null
                      limit $2) c) end as scheduled,
       (select min(d.run_at_ms)
        from priorities r
        cross join lateral (
            select j.run_at_ms from {schema}.jobs j
            where j.queue = r.queue and j.state in ('ready', 'waiting')
              and j.priority = r.priority and j.run_at_ms <= $1::bigint and j.state = 'ready'
            order by j.run_at_ms
            limit 1
        ) d
        where r.queue = n.queue and r.priority is not null) as oldest_ready_ms,
       (select count(*) from (select 1 from {schema}.jobs j
                              where j.queue = n.queue and j.state = 'running'
                              order by j.created_at_ms limit $2) c)
           as running,
       (select count(*) from (select 1 from {schema}.jobs j
                              where j.queue = n.queue and j.state = 'waiting'
                              order by j.created_at_ms limit $2) c)
           as waiting,
       (select count(*) from (select 1 from {schema}.jobs j
                              where j.queue = n.queue and j.state = 'dead'
                              order by j.created_at_ms limit $2) c) as dead,
       (select count(*) from (select 1 from {schema}.jobs j
                              where j.queue = n.queue and j.state = 'failed'
                              order by j.created_at_ms limit $2) c)
           as failed,
       exists (select 1 from {schema}.pauses p where p.kind = 'queue' and p.name = n.queue)
           as paused
from named n
cross join lateral (
    select (select count(*) from (
                select 1
                from priorities r
                cross join lateral (
                    select 1 from {schema}.jobs j
                    where j.queue = r.queue and j.state in ('ready', 'waiting')
                      and j.priority = r.priority and j.run_at_ms <= $1::bigint
                      and j.state = 'ready'
                    order by j.run_at_ms
                    limit $2
                ) d
                where r.queue = n.queue and r.priority is not null
                limit $2) c) as ready
) due
order by n.queue collate "C";
