-- Child jobs (issue 44): a group of children spawned by a running parent, keyed by the parent
-- run and the step (child_groups), parked on by the parent, and resolved by the statement that
-- ends its last child (or its first failed one, when the group fails fast). Nothing polls: the
-- resolving statement is the child own ack, complete, ack_many, terminal nack, cancel,
-- cancel_many or burial, each writing resolve_groups beside its own update.
-- Lock order, in every statement: the job rows it ends, then child_shards, then child_groups, then
-- the parent job rows, each set locked in key order by a select for update that the next write
-- waits on (an uncorrelated subquery in its where clause, run before its scan). A park locks the
-- parent row, then its group row: a terminal write locks a parent only after seeing the group
-- parked, which the park writes after it holds the parent row, so the two never wait in a circle.

-- fragment: child_ending
-- A SET item of an update that ends jobs (alias j): a child counts its endings, and only its
-- first (child_endings reaching 1) is counted into its group.
child_endings = case when j.child_index is null then null else coalesce(j.child_endings, 0) + 1 end

-- fragment: resolve_groups
-- CTEs written after a statement CTEs params (now_ms) and ended (id, parent_run_id,
-- child_step, child_index, counts, failed): the jobs this statement ended, counts true for a
-- child first ending, failed for an ending other than completed. Each counted child moves its
-- shard, and a group moves when a shard empties or a child failed. The group resolves when every
-- shard is empty, or at its first failure when it fails fast, and only a group that waits. The
-- statement that resolves it (resolved is that rule of open_shards and failed, which only fall and
-- grow, so one statement alone sees it turn) makes a parked parent due now under the run that
-- spawned the group, with a NOTIFY of its queue on the wake channel. The parent row is matched
-- by id alone and its new values computed in the SET list, so a park that committed after this
-- statement began is read at its newest version. A parent this statement ends itself is not
-- written twice.
ended_shards as (
    select e.parent_run_id, e.child_step, (e.child_index % 16)::smallint as shard,
           count(*)::int as n
    from ended e
    where e.counts
    group by e.parent_run_id, e.child_step, (e.child_index % 16)::smallint
),
locked_shards as (
    select s.shard
    from {schema}.child_shards s
    join ended_shards e
      on e.parent_run_id = s.parent_run_id and e.child_step = s.step and e.shard = s.shard
    order by s.parent_run_id, s.step, s.shard
    for update of s
),
moved_shards as (
    update {schema}.child_shards s
    set pending = s.pending - e.n
    from ended_shards e
    where e.parent_run_id = s.parent_run_id and e.child_step = s.step and e.shard = s.shard
      and (select count(*) from locked_shards) >= 0
    returning s.parent_run_id, s.step, s.pending = 0 as emptied
),
group_moves as (
    select e.parent_run_id, e.child_step as step,
           (count(*) filter (where e.failed))::int as failed,
           min(e.child_index) filter (where e.failed) as first_failed,
           (select count(*) from moved_shards m
            where m.parent_run_id = e.parent_run_id and m.step = e.child_step and m.emptied)::int
           as emptied
    from ended e
    where e.counts
    group by e.parent_run_id, e.child_step
),
locked_groups as (
    select g.step
    from {schema}.child_groups g
    join group_moves d on d.parent_run_id = g.parent_run_id and d.step = g.step
    where d.failed > 0 or d.emptied > 0
    order by g.parent_run_id, g.step
    for update of g
),
moved_groups as (
    update {schema}.child_groups g
    set open_shards = g.open_shards - d.emptied, failed = g.failed + d.failed,
        first_failed = coalesce(g.first_failed, d.first_failed),
        resolved = g.wait and (g.open_shards - d.emptied = 0
                               or (g.fail_fast and g.failed + d.failed > 0))
    from group_moves d
    where d.parent_run_id = g.parent_run_id and d.step = g.step
      and (d.failed > 0 or d.emptied > 0)
      and (select count(*) from locked_groups) >= 0
    returning g.parent_id, g.parent_run_id, g.parked,
              g.resolved and not (g.open_shards + d.emptied = 0
                                  or (g.fail_fast and g.failed - d.failed > 0)) as resolved_now
),
resolved_groups as (
    select r.parent_id, r.parent_run_id
    from moved_groups r
    where r.resolved_now and r.parked
      and not exists (select 1 from ended e where e.id = r.parent_id)
),
locked_parents as (
    select pj.id
    from {schema}.jobs pj
    join resolved_groups r on r.parent_id = pj.id
    order by pj.id
    for update of pj
),
woken_parents as (
    update {schema}.jobs pj
    set run_at_ms = case when pj.state = 'waiting' and pj.run_id = r.parent_run_id
                         then least(pj.run_at_ms, p.now_ms) else pj.run_at_ms end,
        updated_at_ms = p.now_ms
    from resolved_groups r, params p
    where pj.id = r.parent_id and (select count(*) from locked_parents) >= 0
    returning case when pj.state = 'waiting' and pj.run_id = r.parent_run_id
                   then pg_notify({wake_channel}, pj.queue) end as told
)

-- fragment: cancel_tree
-- CTEs written after a statement CTEs params (now_ms), cancel_error (error) and roots (id):
-- cancel each live root and every live descendant spawned under it through a group that is not
-- detached, the job rows locked deepest first and then by id before any is written (the order
-- of a child ending: its own row, then its parent). Each cancelled child counts into its group
-- (resolve_groups). Answers cancelled, the full row of each as the cancel returns it.
tree as (
    select r.id, 0 as depth from roots r
    union all
    select c.id, t.depth + 1
    from tree t
    join {schema}.jobs c on c.parent_id = t.id and not c.detached
),
locked as (
    select j.id
    from tree t
    join {schema}.jobs j on j.id = t.id
    where j.state in ('ready', 'running', 'waiting')
    order by t.depth desc, j.id
    for update of j
),
cancelled as (
    update {schema}.jobs j
    set state = 'cancelled', lease_until_ms = null, last_error = (select error from cancel_error),
        finished_at_ms = p.now_ms, updated_at_ms = p.now_ms, {child_ending}
    from params p
    where j.id in (select l.id from locked l) and j.state in ('ready', 'running', 'waiting')
      and (select count(*) from locked) >= 0
    returning j.id, j.run_id, j.name, j.queue, j.state, j.tenant_id, j.idempotency_key,
              j.payload::text as payload, j.priority, j.attempt, j.max_attempts, j.dead_letter,
              j.claims, j.claimed_by, j.lease_until_ms, j.run_at_ms, j.created_at_ms,
              j.updated_at_ms, j.finished_at_ms, j.last_error, j.progress, j.enqueued_by,
              j.traceparent, j.parent_run_id, j.child_step, j.child_index, j.child_endings,
              p.now_ms, {tell_watcher}
),
ended as (
    select c.id, c.parent_run_id, c.child_step, c.child_index, c.child_endings = 1 as counts,
           true as failed
    from cancelled c
),
{resolve_groups}

-- name: spawn_children
-- One page of a group children, under the parent fence read for share (a cancel of the
-- parent waits for the page to commit and its next pass sees the children, or the page waits for
-- the cancel and finds the fence gone): the group row and its shard rows on the first page (each
-- shard holding how many of the total it will see), the child rows, a row whose id exists
-- skipped (a replay), and spawned moved to the end of the page. Answers fenced (0: nothing
-- written) and spawned.
-- $1 now, $2 parent id, $3 worker, $4 claims, $5 parent run id, $6 step, $7 total, $8 wait,
-- $9 fail fast, $10 detached, $11 the first index, $12..$24 the children columns as arrays,
-- $25 the queues to wake, $26 the channel.
with params as (
    select coalesce($1::bigint, (extract(epoch from now()) * 1000)::bigint) as now_ms
),
parent as (
    select j.id
    from {schema}.jobs j
    where j.id = $2 and j.state = 'running' and j.claimed_by = $3 and j.claims = $4
    for share of j
),
page_end as (
    select $11::int + cardinality($12::uuid[]) as spawned
),
created as (
    insert into {schema}.child_groups (parent_run_id, step, parent_id, total, spawned, wait,
                                       fail_fast, detached, open_shards, resolved, created_at_ms)
    select $5::uuid, $6::text, pa.id, $7::int, e.spawned, $8::bool, $9::bool, $10::bool,
           least($7::int, 16), $8::bool and $7::int = 0, p.now_ms
    from parent pa, page_end e, params p
    on conflict (parent_run_id, step) do nothing
    returning parent_run_id, step, total, spawned
),
shards as (
    insert into {schema}.child_shards (parent_run_id, step, shard, pending)
    select c.parent_run_id, c.step, s.shard::smallint, (c.total - s.shard + 15) / 16
    from created c
    cross join lateral generate_series(0, least(c.total, 16) - 1) as s(shard)
),
moved as (
    update {schema}.child_groups g
    set spawned = greatest(g.spawned, e.spawned)
    from page_end e
    where g.parent_run_id = $5 and g.step = $6 and exists (select 1 from parent)
    returning g.spawned
),
inserted as (
    insert into {schema}.jobs (id, run_id, name, queue, tenant_id, idempotency_key, payload,
                               priority, run_at_ms, max_attempts, dead_letter, enqueued_by,
                               traceparent, created_at_ms, updated_at_ms, parent_id,
                               parent_run_id, child_step, child_index, detached)
    select t.id, t.run_id, t.name, t.queue, t.tenant_id, t.idempotency_key, t.payload, t.priority,
           coalesce(t.run_at_ms, p.now_ms), t.max_attempts, t.dead_letter, t.enqueued_by,
           t.traceparent, p.now_ms, p.now_ms, $2::uuid, $5::uuid, $6::text,
           $11::int + (t.ord - 1)::int, $10::bool
    from unnest($12::uuid[], $13::uuid[], $14::text[], $15::text[], $16::text[], $17::text[],
                $18::text[], $19::int[], $20::bigint[], $21::int[], $22::bool[], $23::text[],
                $24::text[])
         with ordinality as t(id, run_id, name, queue, tenant_id, idempotency_key, payload, priority,
                              run_at_ms, max_attempts, dead_letter, enqueued_by, traceparent, ord)
    cross join params p
    where exists (select 1 from parent)
    order by t.ord
    on conflict do nothing
    returning queue, run_at_ms
),
woken as (
    select pg_notify($26, w.queue)
    from (select distinct ins.queue
          from inserted ins, params p
          where ins.run_at_ms <= p.now_ms and ins.queue = any($25::text[])) w
)
select (select count(*) from parent) as fenced,
       coalesce((select spawned from created), (select spawned from moved)) as spawned,
       (select count(*) from woken) as woken;

-- name: child_group
-- A group as stored: ended is the total less what its shards still wait for.
-- $1 parent run id, $2 step.
select g.total, g.spawned,
       g.total - coalesce((select sum(s.pending) from {schema}.child_shards s
                           where s.parent_run_id = g.parent_run_id and s.step = g.step), 0)::int
       as ended,
       g.failed, g.first_failed, g.resolved
from {schema}.child_groups g
where g.parent_run_id = $1 and g.step = $2;

-- name: park_children
-- The park of a parent on a group, in one statement: the parent row locked under its fence, the
-- group marked parked (its row locked after the parent), then the settle room Nack stored on
-- the parent (waiting, its attempt handed back), due now instead, its queue notified, when the
-- group already resolved. A child ending later sees parked and wakes the parent in its own
-- statement. Answers landed.
-- $1 now, $2 parent id, $3 worker, $4 claims, $5 the next state, $6 run_at (null: now), $7 one
-- when the attempt is handed back, $8 parent run id, $9 step.
with params as (
    select coalesce($1::bigint, (extract(epoch from now()) * 1000)::bigint) as now_ms
),
fenced as (
    select j.id
    from {schema}.jobs j
    where j.id = $2 and j.state = 'running' and j.claimed_by = $3 and j.claims = $4
    for update of j
),
marked as (
    update {schema}.child_groups g
    set parked = true
    where g.parent_run_id = $8 and g.step = $9 and (select count(*) from fenced) > 0
    returning g.resolved
),
parked as (
    update {schema}.jobs j
    set state = $5,
        run_at_ms = case when coalesce((select m.resolved from marked m), false) then p.now_ms
                         else coalesce($6::bigint, p.now_ms) end,
        attempt = greatest(j.attempt - $7::int, 0),
        lease_until_ms = null,
        updated_at_ms = p.now_ms
    from params p
    where j.id = $2 and j.state = 'running' and j.claimed_by = $3 and j.claims = $4
      and (select count(*) from marked) >= 0
    returning case when coalesce((select m.resolved from marked m), false)
                   then pg_notify({wake_channel}, j.queue) end as told
)
select count(*) as landed from parked;

-- name: child_page
-- Up to $4 children of a group with an index above $3, in index order, read by jobs_children.
-- $1 parent run id, $2 step, $3 the index after which the page starts, $4 the page size.
select c.child_index, c.id, c.state, c.result, c.last_error
from {schema}.child_groups g
join {schema}.jobs c
  on c.parent_id = g.parent_id and c.parent_run_id = g.parent_run_id and c.child_step = g.step
 and c.child_index > $3
where g.parent_run_id = $1 and g.step = $2
order by c.child_index
limit $4;

-- name: cancel_children
-- The fail-fast stop of a group, under the parent fence: its live children, with their live
-- descendants (cancel_tree). Answers fenced (0: nothing written) and moved.
-- $1 now, $2 parent run id, $3 the error written, $4 parent id, $5 worker, $6 claims, $7 step.
with recursive params as (
    select coalesce($1::bigint, (extract(epoch from now()) * 1000)::bigint) as now_ms
),
cancel_error as (
    select $3::text as error
),
fence as (
    select j.id
    from {schema}.jobs j
    where j.id = $4 and j.state = 'running' and j.claimed_by = $5 and j.claims = $6
),
roots as (
    select c.id
    from {schema}.jobs c
    where c.parent_id = $4 and c.parent_run_id = $2 and c.child_step = $7
      and c.state in ('ready', 'running', 'waiting') and exists (select 1 from fence)
),
{cancel_tree},
counted as (
    select c.name, 'cancelled' as outcome, c.now_ms from cancelled c
),
{count_minute}
select (select count(*) from fence) as fenced, (select count(*) from cancelled) as moved;

-- name: cancel_descendants
-- The cascade of a cancel again, with a snapshot taken after the cancel landed: the live
-- descendants of a cancelled job that a spawn page committed while the cancel waited for it. The
-- driver runs it until it cancels nothing. Answers moved.
-- $1 now, $2 the cancelled job, $3 the error written.
with recursive params as (
    select coalesce($1::bigint, (extract(epoch from now()) * 1000)::bigint) as now_ms
),
cancel_error as (
    select $3::text as error
),
roots as (
    select c.id from {schema}.jobs c where c.parent_id = $2 and not c.detached
),
{cancel_tree},
counted as (
    select c.name, 'cancelled' as outcome, c.now_ms from cancelled c
),
{count_minute}
select count(*) as moved from cancelled;

-- name: family
-- A job parent and its children counted by state (one row, state null, for a job with none).
-- $1 job id.
select j.parent_id, c.state, count(c.id)::bigint as count
from {schema}.jobs j
left join {schema}.jobs c on c.parent_id = j.id
where j.id = $1
group by j.parent_id, c.state
order by c.state;
