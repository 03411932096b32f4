-- Retention: what xjobs.purge deletes, a bounded batch a statement. Each walks an index from its
-- oldest entry and stops at the batch size, so a batch is one short transaction whatever the
-- table holds. A purge locks only finished rows (and rows of the side tables), never a row a
-- claim selects, so a claim never waits on it. Each answers purged, the rows it deleted: fewer
-- than the batch size means nothing is left to purge at this cut-off.

-- fragment: purge_finished
'completed', 'failed', 'dead', 'cancelled'

-- fragment: purge_orphan
-- A finished job of alias j that no live parent may still read: a child of a live parent is
-- kept (its result is read when the parent continues), whatever its age.
(j.parent_id is null
 or not exists (select 1 from {schema}.jobs pj
                where pj.id = j.parent_id and pj.state in ('ready', 'running', 'waiting')))

-- fragment: purge_cuts
-- Each (state, job name) that has a finished row, found by a loose scan of jobs_purgeable (one
-- index descent a pair), with the cut-off that applies to it: the name keep if it has one, else
-- its state keep. $1 finished states, $2 their cut-offs, $3 names with a keep of their own,
-- $4 their cut-offs.
groups (state, name) as (
    (select j.state, j.name from {schema}.jobs j
     where j.state in ({purge_finished})
     order by j.state, j.name
     limit 1)
    union all
    select nxt.state, nxt.name
    from groups g
    cross join lateral (
        select j.state, j.name from {schema}.jobs j
        where j.state in ({purge_finished}) and (j.state, j.name) > (g.state, g.name)
        order by j.state, j.name
        limit 1
    ) nxt
),
cuts as (
    select g.state, g.name, coalesce(o.cutoff, s.cutoff) as cutoff
    from groups g
    join unnest($1::text[], $2::bigint[]) as s(state, cutoff) on s.state = g.state
    left join unnest($3::text[], $4::bigint[]) as o(name, cutoff) on o.name = g.name
)

-- name: purge_jobs
-- At most $5 finished jobs past their cut-off, oldest finish first in each group, but a child
-- of a live parent (purge_orphan), with their steps, attempt errors, event wait and the child
-- groups they spawned (each found by its key from the array of what went, so
-- the side tables are read by index whatever the planner guesses of the batch). The delete checks the state and the finish again, so a
-- job requeued (or finished again) since the scan is left alone. Counters are not touched: they
-- count endings, not rows.
with recursive {purge_cuts},
doomed as (
    select d.id, c.cutoff
    from cuts c
    cross join lateral (
        select j.id from {schema}.jobs j
        where j.state in ({purge_finished}) and j.state = c.state and j.name = c.name
          and j.finished_at_ms < c.cutoff and {purge_orphan}
        order by j.finished_at_ms
        limit $5
    ) d
    limit $5
),
gone as (
    delete from {schema}.jobs j
    using doomed d
    where j.id = d.id and j.state in ({purge_finished}) and j.finished_at_ms < d.cutoff
    returning j.id, j.run_id
),
gone_steps as (
    delete from {schema}.steps s
    where s.run_id = any(array(select g.run_id from gone g))
    returning s.run_id
),
gone_errors as (
    delete from {schema}.attempt_errors e
    where e.job_id = any(array(select g.id from gone g))
    returning e.job_id
),
gone_waits as (
    delete from {schema}.event_waits w
    where w.job_id = any(array(select g.id from gone g))
    returning w.job_id
),
gone_groups as (
    delete from {schema}.child_groups cg
    where cg.parent_id = any(array(select g.id from gone g))
    returning cg.parent_run_id, cg.step
),
gone_shards as (
    delete from {schema}.child_shards cs
    using gone_groups cg
    where cs.parent_run_id = cg.parent_run_id and cs.step = cg.step
    returning cs.shard
)
select count(*) as purged from gone;

-- name: purge_jobs_count
-- The dry run of purge_jobs: how many finished jobs are past their cut-off. $1 to $4 as there.
with recursive {purge_cuts}
select coalesce(sum((
    select count(*) from {schema}.jobs j
    where j.state in ({purge_finished}) and j.state = c.state and j.name = c.name
      and j.finished_at_ms < c.cutoff and {purge_orphan}
)), 0)::bigint as purged
from cuts c;

-- name: purge_events
-- At most $2 events sent before $1 (by events_sent) and at most $2 waits whose deadline passed
-- before it (by event_waits_deadline).
with doomed as (
    select e.id from {schema}.events e where e.sent_at_ms < $1 order by e.sent_at_ms limit $2
),
gone as (
    delete from {schema}.events e using doomed d where e.id = d.id returning e.id
),
lapsed as (
    select w.job_id from {schema}.event_waits w
    where w.deadline_ms < $1
    order by w.deadline_ms
    limit $2
),
gone_waits as (
    delete from {schema}.event_waits w using lapsed l
    where w.job_id = l.job_id and w.deadline_ms < $1
    returning w.job_id
)
select (select count(*) from gone) + (select count(*) from gone_waits) as purged;

-- name: purge_events_count
select (select count(*) from {schema}.events e where e.sent_at_ms < $1)
     + (select count(*) from {schema}.event_waits w where w.deadline_ms < $1) as purged;

-- name: purge_outbox
-- At most $2 outbox rows published before $1, oldest first (by outbox_published).
with doomed as (
    select o.id from {schema}.outbox o
    where o.published_at_ms is not null and o.published_at_ms < $1
    order by o.published_at_ms
    limit $2
),
gone as (
    delete from {schema}.outbox o using doomed d
    where o.id = d.id and o.published_at_ms is not null
    returning o.id
)
select count(*) as purged from gone;

-- name: purge_outbox_count
select count(*) as purged from {schema}.outbox o
where o.published_at_ms is not null and o.published_at_ms < $1;

-- name: purge_workers
-- At most $2 worker rows that expired before $1. The table holds a row per worker process, so
-- it has no index but its key: a scan of it is a scan of a few rows.
with doomed as (
    select w.id from {schema}.workers w where w.expires_at_ms < $1 order by w.expires_at_ms limit $2
),
gone as (
    delete from {schema}.workers w using doomed d
    where w.id = d.id and w.expires_at_ms < $1
    returning w.id
)
select count(*) as purged from gone;

-- name: purge_workers_count
select count(*) as purged from {schema}.workers w where w.expires_at_ms < $1;

-- fragment: purge_counter_rows
-- The counter rows past their tier cut-off, by the counters key (tier, bucket_ms, ...): a minute
-- row only once its bucket is in counter_folds, so an hour and a day hold what it counted before
-- it goes. $1 tiers, $2 their cut-offs.
select k.tier, k.bucket_ms, k.name, k.outcome, k.shard
from unnest($1::text[], $2::bigint[]) as c(tier, cutoff)
cross join lateral (
    select k.tier, k.bucket_ms, k.name, k.outcome, k.shard from {schema}.counters k
    where k.tier = c.tier and k.bucket_ms < c.cutoff
      and (k.tier <> 'minute'
           or exists (select 1 from {schema}.counter_folds f where f.bucket_ms = k.bucket_ms))
    order by k.bucket_ms
    limit $3
) k

-- name: purge_counters
-- At most $3 counter rows, and then the counter_folds marks of minute buckets before the minute
-- cut-off that no minute row is left of (the rollup starts its scan a day before the newest
-- mark, which is never one of these). $4 the minute cut-off.
with doomed as (
    {purge_counter_rows}
    limit $3
),
gone as (
    delete from {schema}.counters k using doomed d
    where (k.tier, k.bucket_ms, k.name, k.outcome, k.shard)
        = (d.tier, d.bucket_ms, d.name, d.outcome, d.shard)
    returning k.tier, k.bucket_ms
),
marks as (
    select f.bucket_ms from {schema}.counter_folds f
    where f.bucket_ms < $4
      and not exists (select 1 from {schema}.counters k
                      where k.tier = 'minute' and k.bucket_ms = f.bucket_ms
                        and not exists (select 1 from gone g
                                        where g.tier = 'minute' and g.bucket_ms = k.bucket_ms))
    order by f.bucket_ms
    limit $3
),
gone_marks as (
    delete from {schema}.counter_folds f using marks m where f.bucket_ms = m.bucket_ms
    returning f.bucket_ms
)
select (select count(*) from gone) + (select count(*) from gone_marks) as purged;

-- name: purge_counters_count
-- The dry run of purge_counters: the counter rows past their cut-off ($3 null: no bound).
select count(*) as purged from ({purge_counter_rows}) x;
