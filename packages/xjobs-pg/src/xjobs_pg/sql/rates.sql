-- The rate store: one GCRA theoretical arrival time (TAT) per bucket key, in epoch ms.
-- A permit of a bucket is free at now when TAT - now is at most (burst - 1) * interval.

-- name: rate_ensure
-- Gives each bucket key without a row an idle one (a TAT of 0 has passed: all its permits are
-- free), so that rate_acquire can lock it. Keeps an existing row as it is.
-- $1 the bucket keys.
insert into {schema}.rates (key, tat_ms, line_ms)
select k.key, 0, 0 from unnest($1::text[]) as k(key)
on conflict (key) do nothing;

-- name: rate_acquire_all
-- A batch of grants, each one permit of every bucket of it, in one statement and one implicit
-- transaction: the common case, every grant free even after the grants before it took theirs,
-- in closed form. Then it takes them all (a key TAT moves on by the intervals of its grants)
-- and answers taken. Else it takes nothing, and rate_acquire takes the grants in turn.
-- The rows of the keys are locked in key order (two acquirers of overlapping buckets cannot
-- deadlock) and read at their latest committed version (held), so the acquirers of a bucket
-- serialise on its row. A key with no row yet cannot be locked: complete is false, nothing is
-- taken, and the caller runs rate_ensure and asks again.
-- The rate state is a pacing hint (a crash that loses the last commits lets at most one more
-- burst through), so the commit does not wait for the WAL flush (relaxed).
-- Answers one row: complete, taken.
-- $1 now (null for the server clock), $2 the grant of each bucket (1, 2, and on), $3 keys,
-- $4 emission intervals in ms, $5 bursts.
with params as (
    select coalesce($1::bigint, (extract(epoch from clock_timestamp()) * 1000)::bigint)::float8 as now_ms,
           set_config('synchronous_commit', 'off', true) as relaxed
),
buckets as (
    -- before_ms: the intervals the earlier grants of the same key take
    select u.key, u.interval_ms, u.burst,
           coalesce(sum(u.interval_ms) over (partition by u.key order by u.grant_no
                                             rows between unbounded preceding and 1 preceding), 0)
               as before_ms
    from unnest($2::int[], $3::text[], $4::float8[], $5::int[]) as u(grant_no, key, interval_ms, burst)
),
held as (
    select r.key, r.tat_ms
    from {schema}.rates r
    where r.key = any($3::text[])
    order by r.key
    for update of r
),
verdict as (
    select count(distinct h.key) = count(distinct b.key) as complete,
           coalesce(bool_and(greatest(h.tat_ms, p.now_ms) + b.before_ms
                             - (b.burst - 1) * b.interval_ms <= p.now_ms), false) as taken
    from buckets b
    cross join params p
    left join held h on h.key = b.key
),
written as (
    update {schema}.rates r
    set tat_ms = greatest(h.tat_ms, p.now_ms) + t.taken_ms
    from (select b.key, sum(b.interval_ms) as taken_ms from buckets b group by b.key) t,
         held h, params p, verdict v
    where r.key = any($3::text[]) and r.key = t.key and h.key = t.key and v.complete and v.taken
    returning r.key
)
select v.complete, v.complete and v.taken as taken, (select count(*) from written) as written
from verdict v, params p
where p.relaxed is not null;

-- name: rate_acquire
-- Takes the grants in turn, as that many acquires in a row would at one instant: each grant
-- takes one permit of every bucket of it, or none, and sees the TATs and lines the grants before
-- it left. Refused, a grant is due at the latest, over its full buckets, of the next free permit
-- and the bucket line, and each of those lines moves one interval past that instant (runs
-- refused in a row come back an interval apart). Locks, reads, commits and answers complete as
-- rate_acquire_all does. The state goes from grant to grant (turns) as an array of TATs and one
-- of lines, indexed by the place of the key among the sorted keys (slot). Only the rows it
-- changed are written.
-- Answers a row per grant, in order: grant_no, refused and, when refused, due_ms (the instant
-- the run is due, epoch ms), now_ms, and complete.
-- $1 now (null for the server clock), $2 the grant of each bucket (1, 2, and on), $3 keys,
-- $4 emission intervals in ms, $5 bursts.
with recursive params as (
    select coalesce($1::bigint, (extract(epoch from clock_timestamp()) * 1000)::bigint)::float8 as now_ms,
           set_config('synchronous_commit', 'off', true) as relaxed
),
buckets as (
    select u.grant_no, u.key, u.interval_ms, u.burst, dense_rank() over (order by u.key)::int as slot
    from unnest($2::int[], $3::text[], $4::float8[], $5::int[]) as u(grant_no, key, interval_ms, burst)
),
keys as (
    select distinct b.key, b.slot from buckets b
),
held as (
    select r.key, r.tat_ms, r.line_ms
    from {schema}.rates r
    where r.key = any($3::text[])
    order by r.key
    for update of r
),
start as (
    select array_agg(greatest(h.tat_ms, p.now_ms) order by k.slot) as tats,
           array_agg(h.line_ms order by k.slot) as lines,
           count(h.key) = count(*) as complete
    from keys k
    cross join params p
    left join held h on h.key = k.key
),
turns (grant_no, tats, lines, refused, due_ms) as (
    select 0, s.tats, s.lines, false, null::float8 from start s where s.complete
    union all
    select t.grant_no + 1,
           -- granted: every bucket of the grant moves its TAT one interval on
           case when v.due_ms is null then array(
               select s.tat + coalesce(g.interval_ms, 0)
               from unnest(t.tats) with ordinality as s(tat, slot)
               left join buckets g on g.grant_no = t.grant_no + 1 and g.slot = s.slot
               order by s.slot
           ) else t.tats end,
           -- refused: every full bucket of the grant moves its line one interval past due_ms
           case when v.due_ms is null then t.lines else array(
               select case when g.slot is null then s.line
                           else greatest(s.line, v.due_ms + g.interval_ms) end
               from unnest(t.lines) with ordinality as s(line, slot)
               left join buckets g on g.grant_no = t.grant_no + 1 and g.slot = s.slot
                   and t.tats[g.slot] - (g.burst - 1) * g.interval_ms > v.now_ms
               order by s.slot
           ) end,
           v.due_ms is not null,
           v.due_ms
    from turns t
    cross join lateral (
        select p.now_ms,
               max(greatest(t.tats[g.slot] - (g.burst - 1) * g.interval_ms, t.lines[g.slot]))
                   filter (where t.tats[g.slot] - (g.burst - 1) * g.interval_ms > p.now_ms) as due_ms
        from buckets g
        cross join params p
        where g.grant_no = t.grant_no + 1
        group by p.now_ms
    ) v
),
last as (
    select t.tats, t.lines from turns t order by t.grant_no desc limit 1
),
written as (
    update {schema}.rates r
    set tat_ms = l.tats[k.slot], line_ms = l.lines[k.slot]
    from keys k, last l, start s
    where r.key = any($3::text[]) and r.key = k.key
      and (l.tats[k.slot] <> s.tats[k.slot] or l.lines[k.slot] <> s.lines[k.slot])
    returning r.key
)
select t.grant_no, t.refused, t.due_ms, p.now_ms, s.complete, (select count(*) from written) as written
from params p
cross join start s
left join turns t on t.grant_no > 0
where p.relaxed is not null
order by t.grant_no;

-- name: rate_reserve
-- Takes count permits of every bucket at once, held ahead by one process that starts each within
-- the hold, or none. The held permits are placed from now + hold on: each TAT moves to
-- greatest(TAT, now + hold) + count * interval, so a permit started during its hold is one GCRA
-- would have granted then. Refused when a TAT would then be more than its ceiling past now (half
-- the burst left to per-run grants): nothing is written. Locks, reads, commits and answers
-- complete as rate_acquire_all does.
-- Answers one row: complete, taken.
-- $1 now (null for the server clock), $2 keys (distinct), $3 emission intervals in ms,
-- $4 ceilings in ms, $5 count, $6 hold in ms.
with params as (
    select coalesce($1::bigint, (extract(epoch from clock_timestamp()) * 1000)::bigint)::float8 as now_ms,
           set_config('synchronous_commit', 'off', true) as relaxed
),
asked as (
    select u.key, u.interval_ms, u.ceiling_ms
    from unnest($2::text[], $3::float8[], $4::float8[]) as u(key, interval_ms, ceiling_ms)
),
held as (
    select r.key, r.tat_ms
    from {schema}.rates r
    where r.key = any($2::text[])
    order by r.key
    for update of r
),
placed as (
    select a.key, h.key is not null as found,
           greatest(h.tat_ms, p.now_ms + $6::int) + $5::int * a.interval_ms as tat_ms,
           a.ceiling_ms, p.now_ms
    from asked a
    cross join params p
    left join held h on h.key = a.key
),
verdict as (
    select bool_and(found) as complete, bool_and(tat_ms - now_ms <= ceiling_ms) as taken
    from placed
),
written as (
    update {schema}.rates r
    set tat_ms = pl.tat_ms
    from placed pl, verdict v
    where r.key = any($2::text[]) and r.key = pl.key and v.complete and v.taken
    returning r.key
)
select v.complete, v.complete and v.taken as taken, (select count(*) from written) as written
from verdict v, params p
where p.relaxed is not null;

-- name: rate_abandon
-- Hands back the permit a grant took: each TAT moves back one interval, never before now. The
-- rows are locked in key order first, as rate_acquire locks them (the two cannot deadlock).
-- $1 now (null for the server clock), $2 keys, $3 emission intervals in ms.
with held as (
    select r.key from {schema}.rates r where r.key = any($2::text[]) order by r.key for update of r
)
update {schema}.rates r
set tat_ms = greatest(
    r.tat_ms - u.interval_ms,
    coalesce($1::bigint, (extract(epoch from clock_timestamp()) * 1000)::bigint)::float8
)
from unnest($2::text[], $3::float8[]) as u(key, interval_ms), held h
where r.key = u.key and h.key = u.key;

-- name: rate_spent
-- How many permits of one bucket are spent now.
-- $1 now (null for the server clock), $2 key, $3 the emission interval in ms.
select greatest(
    r.tat_ms - coalesce($1::bigint, (extract(epoch from clock_timestamp()) * 1000)::bigint)::float8,
    0
) / $3::float8 as spent
from {schema}.rates r
where r.key = $2;
