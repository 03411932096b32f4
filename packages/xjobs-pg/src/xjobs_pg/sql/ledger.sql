-- What the settles record beside the job rows: minute counters and attempt errors, written in
-- the settling statement through the two fragments below, and the pause rows the claim reads.

-- fragment: count_minute
-- A CTE that bumps the minute counter of each row of the CTE counted (name, outcome, now_ms),
-- one upsert per name and outcome. The row is the shard of the settling backend (its pid modulo
-- 8), so concurrent settles of one name seldom wait on one row lock. Rows go in (name, outcome)
-- order, so two statements that share a shard take its row locks in one order. 60000 is
-- MINUTE_MS of the contract (a test pins it).
count_minute as (
    insert into {schema}.counters (tier, bucket_ms, name, outcome, shard, count)
    select 'minute', c.now_ms - c.now_ms % 60000, c.name, c.outcome,
           (pg_backend_pid() % 8)::smallint, count(*)
    from counted c
    group by c.now_ms, c.name, c.outcome
    order by c.name, c.outcome
    on conflict (tier, bucket_ms, name, outcome, shard) do update
    set count = {schema}.counters.count + excluded.count
)

-- fragment: error_history
-- Two CTEs that keep the error of each row of the CTE failed_attempts (job_id, claims, attempt,
-- worker_id, at_ms, error) and drop the oldest of its job past 25 rows (MAX_ERROR_HISTORY of the
-- contract, a test pins it). The delete reads the rows as they were before this insert, so it
-- keeps the newest 24 of them beside the new one.
kept_errors as (
    insert into {schema}.attempt_errors (job_id, claims, attempt, worker_id, at_ms, error)
    select f.job_id, f.claims, f.attempt, f.worker_id, f.at_ms, f.error
    from failed_attempts f
    on conflict (job_id, claims) do nothing
),
dropped_errors as (
    delete from {schema}.attempt_errors e
    using failed_attempts f
    where e.job_id = f.job_id
      and e.claims <= (select o.claims from {schema}.attempt_errors o
                       where o.job_id = f.job_id
                       order by o.claims desc
                       offset 24 limit 1)
)

-- name: counter_buckets
-- The buckets of one tier from an instant on, the shards of each summed.
-- $1 tier, $2 since.
select c.bucket_ms, c.name, c.outcome, sum(c.count)::bigint as count
from {schema}.counters c
where c.tier = $1 and c.bucket_ms >= $2
group by c.bucket_ms, c.name, c.outcome
having sum(c.count) > 0
order by c.bucket_ms, c.name collate "C", c.outcome collate "C";

-- name: rollup_counters
-- Folds every closed minute bucket (before the minute of $1) into its hour and day, each at most
-- once: a bucket is folded only by the statement whose insert into counter_folds landed. The
-- scan starts a day before the newest folded bucket, so its cost is the unfolded minutes, not
-- every minute ever counted. Answers how many minute buckets it folded.
-- $1 now, $2 minute ms, $3 hour ms, $4 day ms.
with params as (
    select $1::bigint - $1::bigint % $2::bigint as current_ms,
           coalesce((select max(f.bucket_ms) from {schema}.counter_folds f), 0) - $4::bigint
               as floor_ms
),
folded as (
    insert into {schema}.counter_folds (bucket_ms, folded_at_ms)
    select distinct c.bucket_ms, $1::bigint
    from {schema}.counters c, params p
    where c.tier = 'minute' and c.bucket_ms >= p.floor_ms and c.bucket_ms < p.current_ms
      and not exists (select 1 from {schema}.counter_folds f where f.bucket_ms = c.bucket_ms)
    order by c.bucket_ms
    on conflict (bucket_ms) do nothing
    returning bucket_ms
),
minutes as (
    select c.bucket_ms, c.name, c.outcome, sum(c.count)::bigint as count
    from {schema}.counters c
    join folded f on f.bucket_ms = c.bucket_ms
    where c.tier = 'minute'
    group by c.bucket_ms, c.name, c.outcome
),
hours as (
    insert into {schema}.counters (tier, bucket_ms, name, outcome, shard, count)
    select 'hour', m.bucket_ms - m.bucket_ms % $3::bigint, m.name, m.outcome, 0, sum(m.count)
    from minutes m
    group by 2, m.name, m.outcome
    order by 2, m.name, m.outcome
    on conflict (tier, bucket_ms, name, outcome, shard) do update
    set count = {schema}.counters.count + excluded.count
),
days as (
    insert into {schema}.counters (tier, bucket_ms, name, outcome, shard, count)
    select 'day', m.bucket_ms - m.bucket_ms % $4::bigint, m.name, m.outcome, 0, sum(m.count)
    from minutes m
    group by 2, m.name, m.outcome
    order by 2, m.name, m.outcome
    on conflict (tier, bucket_ms, name, outcome, shard) do update
    set count = {schema}.counters.count + excluded.count
)
select count(*) as folded from folded;

-- name: pause
-- Writes a pause row, and answers a row only when there was none.
-- $1 now, $2 kind, $3 name.
insert into {schema}.pauses (kind, name, paused_at_ms)
values ($2, $3, coalesce($1::bigint, (extract(epoch from now()) * 1000)::bigint))
on conflict (kind, name) do nothing
returning kind;

-- name: resume
-- Deletes a pause row, and when there was one wakes the workers it held back: a queue pause
-- notifies its queue, a job pause every known queue (a loose scan of jobs_listed), the payload
-- the queue name as an enqueue sends it.
-- $1 kind, $2 name, $3 channel.
with recursive gone as (
    delete from {schema}.pauses
    where kind = $1 and name = $2
    returning kind, name
),
known(queue) as (
    select min(j.queue) from {schema}.jobs j where $1::text = 'job'
    union all
    select (select min(j.queue) from {schema}.jobs j where j.queue > k.queue)
    from known k
    where k.queue is not null
),
woken as (
    select pg_notify($3, w.queue)
    from (select k.queue from known k, gone g where k.queue is not null
          union
          select g.name from gone g where g.kind = 'queue') w
)
select (select count(*) from gone) as resumed, (select count(*) from woken) as woken;

-- name: pause_list
-- Every pause row, by kind then name in code point order.
select kind, name, paused_at_ms
from {schema}.pauses
order by kind collate "C", name collate "C";
