-- fragment: enqueue_params
-- The opening CTE of every enqueue statement: `params`, the driver clock now ($14).
with params as (
    select coalesce($14::bigint, (extract(epoch from now()) * 1000)::bigint) as now_ms
)

-- fragment: enqueue_input
-- The opening CTEs of the enqueue statements of a batch: `params` and `input` (the rows $1..$13,
-- unnested in input order with their ordinal).
{enqueue_params},
input as (
    select t.id, t.run_id, t.name, t.queue, t.tenant_id, t.idempotency_key, t.payload, t.priority,
           t.run_at_ms, t.max_attempts, t.dead_letter, t.enqueued_by, t.traceparent, t.ord, p.now_ms
    from unnest($1::uuid[], $2::uuid[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[],
                $8::int[], $9::bigint[], $10::int[], $11::bool[], $12::text[], $13::text[])
         with ordinality as t(id, run_id, name, queue, tenant_id, idempotency_key, payload, priority,
                              run_at_ms, max_attempts, dead_letter, enqueued_by, traceparent, ord)
    cross join params p
)

-- fragment: insert_fresh
-- The insert of the fast paths (`enqueue_fresh`, `enqueue_one`): the columns a new job sets, and
-- the select of its values follows. The conflict names no target, so every unique index of jobs
-- is its arbiter: a row whose id names a job (jobs_pkey, a repeated publish) or whose namespace
-- a live job holds (jobs_live_namespace) is passed over by the index check the insert makes
-- anyway, even against a row a concurrent statement has not committed yet (the insert waits for
-- it). No probe joins jobs, so the plan reads no other row of jobs: the session keeps one generic
-- plan for the statement, as cheap however the table grew since it was made (test_explain.py).
insert into {schema}.jobs (id, run_id, name, queue, tenant_id, idempotency_key, payload, priority,
                           run_at_ms, max_attempts, dead_letter, enqueued_by, traceparent,
                           created_at_ms, updated_at_ms)

-- fragment: enqueue_woken
-- The closing CTE of every enqueue statement: a NOTIFY on $16 of each queue the caller asks to
-- wake ($15) that got a row due now.
woken as (
    select pg_notify($16, w.queue)
    from (select distinct ins.queue
          from inserted ins, params p
          where ins.run_at_ms <= p.now_ms and ins.queue = any($15::text[])) w
)

-- name: enqueue_fresh
-- The fast path of a batch: insert each input row whose id and live namespace are both new, in
-- input order, and answer the ordinals that landed (the first, for an id given twice: the row
-- that landed holds the id and run id of that input row, so neither is sent back). A row with no
-- answer is asked again through `enqueue`, which answers the job holding its id or namespace.
-- The wake is sent for the queues the caller asks to wake ($15) that got a row due now.
{enqueue_input},
inserted as (
    {insert_fresh}
    select i.id, i.run_id, i.name, i.queue, i.tenant_id, i.idempotency_key, i.payload, i.priority,
           coalesce(i.run_at_ms, i.now_ms), i.max_attempts, i.dead_letter, i.enqueued_by, i.traceparent,
           i.now_ms, i.now_ms
    from input i
    order by i.ord
    on conflict do nothing
    returning id, run_id, queue, run_at_ms
),
{enqueue_woken}
select min(i.ord) as ord, (select count(*) from woken) as woken
from inserted ins
join input i on i.id = ins.id
group by ins.id;

-- name: enqueue_one
-- `enqueue_fresh` of one row, in its one round trip: the columns bound as they are ($1..$13, no
-- arrays to unnest and join back), the rest as there. No row answers when the id or the namespace
-- is taken, and the row is then asked again through `enqueue`.
{enqueue_params},
inserted as (
    {insert_fresh}
    select $1::uuid, $2::uuid, $3::text, $4::text, $5::text, $6::text, $7::text, $8::int,
           coalesce($9::bigint, p.now_ms), $10::int, $11::bool, $12::text, $13::text,
           p.now_ms, p.now_ms
    from params p
    on conflict do nothing
    returning id, run_id, queue, run_at_ms
),
{enqueue_woken}
select 1 as ord, (select count(*) from woken) as woken
from inserted ins;

-- name: enqueue
-- The second and last statement of an enqueue that the fast path left unanswered: it answers
-- every row, whatever a concurrent publisher or settle did in between. It inserts each row unless
-- its id already names a job (a repeated publish), and the first row of each namespace in the batch
-- is the one that tries, and a live row holding that namespace is answered through the conflict
-- itself (`do update` of nothing: the insert returns the conflicting row even when it committed
-- after the snapshot of this statement, and if it finished meanwhile the insert lands instead), so no
-- lookup can miss a row the conflict saw. `xmax = 0` tells the row this statement inserted from
-- the live row it returned. The conflict target spells the jobs_live_namespace expression
-- exactly, and so does the live-row lookup left for a row whose id names a job. The wake is sent
-- only for queues the caller asks to wake ($15) that got a row due now.
{enqueue_input},
firsts as (
    select t.id, min(t.ord) as ord from input t group by t.id
),
heads as (
    select distinct on (i.name, coalesce(i.tenant_id, ''), i.idempotency_key) i.ord
    from input i
    join firsts f on f.id = i.id and f.ord = i.ord
    where not exists (select 1 from {schema}.jobs existing where existing.id = i.id)
    order by i.name, coalesce(i.tenant_id, ''), i.idempotency_key, i.ord
),
upserted as (
    insert into {schema}.jobs as j (id, run_id, name, queue, tenant_id, idempotency_key, payload,
                                    priority, run_at_ms, max_attempts, dead_letter, enqueued_by,
                                    traceparent, created_at_ms, updated_at_ms)
    select i.id, i.run_id, i.name, i.queue, i.tenant_id, i.idempotency_key, i.payload, i.priority,
           coalesce(i.run_at_ms, i.now_ms), i.max_attempts, i.dead_letter, i.enqueued_by, i.traceparent,
           i.now_ms, i.now_ms
    from input i
    join heads h on h.ord = i.ord
    order by i.ord
    on conflict (name, coalesce(tenant_id, ''), idempotency_key)
        where state in ('ready', 'running', 'waiting')
        do update set updated_at_ms = j.updated_at_ms
    returning j.id, j.run_id, j.name, j.tenant_id, j.idempotency_key, j.queue, j.run_at_ms,
              j.xmax = 0 as fresh
),
inserted as (
    select u.id, u.queue, u.run_at_ms from upserted u where u.fresh
),
{enqueue_woken}
select i.ord,
       coalesce(own.id, case when ns.fresh then ns.id end, byid.id, ns.id, live.id) as id,
       coalesce(own.run_id, case when ns.fresh then ns.run_id end, byid.run_id, ns.run_id,
                live.run_id) as run_id,
       coalesce(own.fresh, false) and f.ord = i.ord as inserted,
       (select count(*) from woken) as woken
from input i
join firsts f on f.id = i.id
left join upserted own on own.id = i.id
left join upserted ns
       on own.id is null and ns.name = i.name
      and coalesce(ns.tenant_id, '') = coalesce(i.tenant_id, '')
      and ns.idempotency_key = i.idempotency_key
left join {schema}.jobs byid on byid.id = i.id
left join {schema}.jobs live
       on live.name = i.name
      and coalesce(live.tenant_id, '') = coalesce(i.tenant_id, '')
      and live.idempotency_key = i.idempotency_key
      and live.state in ('ready', 'running', 'waiting')
order by i.ord;

-- name: enqueue_flow
-- An enqueue with debounce or throttle (docs/flow-control.md), one statement for a batch whose
-- rows hold distinct namespaces: $17 the debounce window of each row, $18 its throttle window (null
-- when not set). A row whose id names a job answers it (a repeated publish). A throttled row
-- answers the job of its namespace whose window (throttle_until_ms) is still open, live or finished.
-- A debounced row moves the live job of its namespace that no claim took yet (ready, claims 0): the
-- update takes the row lock and re-checks state and claims against a claim that committed in
-- between, so either the claim runs the old input or the job runs the new one, due the window
-- after now. Every other row is inserted (throttled: with its window open) unless a live job
-- holds the namespace, which the conflict itself answers, as in `enqueue`.
{enqueue_input},
flow as (
    select i.id, i.run_id, i.name, i.queue, i.tenant_id, i.idempotency_key, i.payload, i.priority,
           i.run_at_ms, i.max_attempts, i.dead_letter, i.enqueued_by, i.traceparent, i.ord, i.now_ms,
           f.debounce_ms, f.throttle_ms
    from input i
    join unnest($17::bigint[], $18::bigint[]) with ordinality as f(debounce_ms, throttle_ms, ord)
      on f.ord = i.ord
),
byid as (
    select f.ord, j.id, j.run_id
    from flow f
    join {schema}.jobs j on j.id = f.id
),
throttled as (
    select distinct on (f.ord) f.ord, j.id, j.run_id
    from flow f
    join {schema}.jobs j
      on j.name = f.name
     and coalesce(j.tenant_id, '') = coalesce(f.tenant_id, '')
     and j.idempotency_key = f.idempotency_key
     and j.throttle_until_ms > f.now_ms
    where f.throttle_ms is not null
      and not exists (select 1 from byid b where b.ord = f.ord)
    order by f.ord, j.throttle_until_ms desc
),
debounced as (
    update {schema}.jobs j
    set payload = f.payload, enqueued_by = f.enqueued_by, traceparent = f.traceparent,
        run_at_ms = f.now_ms + f.debounce_ms, updated_at_ms = f.now_ms
    from flow f
    where f.debounce_ms is not null
      and j.name = f.name
      and coalesce(j.tenant_id, '') = coalesce(f.tenant_id, '')
      and j.idempotency_key = f.idempotency_key
      and j.state in ('ready', 'running', 'waiting')
      and j.state = 'ready' and j.claims = 0
      and not exists (select 1 from byid b where b.ord = f.ord)
    returning f.ord, j.id, j.run_id
),
upserted as (
    insert into {schema}.jobs as j (id, run_id, name, queue, tenant_id, idempotency_key, payload,
                                    priority, run_at_ms, max_attempts, dead_letter, enqueued_by,
                                    traceparent, created_at_ms, updated_at_ms, throttle_until_ms)
    select f.id, f.run_id, f.name, f.queue, f.tenant_id, f.idempotency_key, f.payload, f.priority,
           case when f.debounce_ms is null then coalesce(f.run_at_ms, f.now_ms)
                else f.now_ms + f.debounce_ms end, f.max_attempts,
           f.dead_letter, f.enqueued_by, f.traceparent, f.now_ms, f.now_ms,
           f.now_ms + f.throttle_ms
    from flow f
    where not exists (select 1 from byid b where b.ord = f.ord)
      and not exists (select 1 from throttled t where t.ord = f.ord)
      and not exists (select 1 from debounced d where d.ord = f.ord)
    order by f.ord
    on conflict (name, coalesce(tenant_id, ''), idempotency_key)
        where state in ('ready', 'running', 'waiting')
        do update set updated_at_ms = j.updated_at_ms
    returning j.id, j.run_id, j.name, j.tenant_id, j.idempotency_key, j.queue, j.run_at_ms,
              j.xmax = 0 as fresh
),
inserted as (
    select u.id, u.queue, u.run_at_ms from upserted u where u.fresh
),
{enqueue_woken}
select f.ord,
       coalesce(b.id, t.id, d.id, u.id) as id,
       coalesce(b.run_id, t.run_id, d.run_id, u.run_id) as run_id,
       coalesce(b.id is null and t.id is null and d.id is null and u.fresh, false) as inserted,
       (select count(*) from woken) as woken
from flow f
left join byid b on b.ord = f.ord
left join throttled t on t.ord = f.ord
left join debounced d on d.ord = f.ord
left join upserted u
       on u.name = f.name
      and coalesce(u.tenant_id, '') = coalesce(f.tenant_id, '')
      and u.idempotency_key = f.idempotency_key
order by f.ord;

-- name: claim
-- One statement: refresh the worker presence ($7), bury lapsed leases on their final attempt,
-- and move up to $3[q] due jobs per queue and $5 in all to running, in claim order (priority,
-- run_at, id), each locked with skip locked so concurrent workers never take one job twice.
-- A paused queue is left out before its scan, and a job of a paused name is passed over by the
-- scan (not exists on the pauses key, so the scan of jobs_claimable keeps its order and its
-- index condition). A burial settles in this statement: it stores the attempt error it writes
-- and bumps the minute counter (dead-lettered or dropped), tells a result waiter and resolves
-- the group of a buried child, as a nack would.
-- Every parameter whose value the planner could estimate from (the queues, their limits, the
-- total, the presence TTL) is read through a scalar subquery, so a plan made for the values at
-- hand costs what the generic plan costs, and the server keeps the generic plan after the fifth
-- claim of a session instead of planning each claim again (planning cost more than the claim
-- itself). The plan is the same index scan in claim order (test_explain.py pins the cached one).
-- The due jobs of a queue are read one priority at a time (`levels`: each priority the queue
-- holds, found by one descent of jobs_claimable each, a loose index scan), so run_at is a bound of
-- each scan and not a filter: a scan stops at the first job not due yet, however many delayed
-- jobs sit behind it (a claim of an idle queue beside 500,000 delayed jobs read all of them).
-- $1 now, $2 queues, $3 their limits, $4 worker, $5 the total limit, $6 lease ms,
-- $7 presence TTL ms (null: none), $8 the error a burial writes.
with recursive params as (
    select coalesce($1::bigint, (extract(epoch from now()) * 1000)::bigint) as now_ms
),
presence as (
    update {schema}.workers w
    set last_seen_ms = p.now_ms, expires_at_ms = p.now_ms + $7::bigint
    from params p
    where (select $7::bigint) is not null and w.id = $4 and w.expires_at_ms > p.now_ms
    returning w.id
),
exhausted as (
    select j.id
    from {schema}.jobs j
    where j.state = 'running' and j.queue = any((select $2::text[])::text[])
      and j.lease_until_ms <= (select now_ms from params)
      and j.attempt >= j.max_attempts
    for update of j skip locked
),
buried as (
    update {schema}.jobs j
    set state = case when j.dead_letter then 'dead' else 'failed' end,
        finished_at_ms = p.now_ms, lease_until_ms = null, last_error = $8, updated_at_ms = p.now_ms,
        {child_ending}
    from params p
    where j.id in (select id from exhausted)
    returning j.id, j.run_id, j.name, j.queue, j.tenant_id, j.payload, j.state,
              j.attempt, j.claims, j.claimed_by, j.parent_run_id, j.child_step, j.child_index,
              j.child_endings, p.now_ms, {tell_watcher}
),
ended as (
    select b.id, b.parent_run_id, b.child_step, b.child_index, b.child_endings = 1 as counts,
           true as failed
    from buried b
),
{resolve_groups},
failed_attempts as (
    select b.id as job_id, b.claims, b.attempt, b.claimed_by as worker_id, b.now_ms as at_ms,
           $8::text as error
    from buried b
),
{error_history},
counted as (
    select b.name, case when b.state = 'dead' then 'dead-lettered' else 'dropped' end as outcome,
           b.now_ms
    from buried b
),
{count_minute},
running_queues as (
    select q.queue, q.lim
    from unnest((select $2::text[]), (select $3::int[])) as q(queue, lim)
    where not exists (select 1 from {schema}.pauses p where p.kind = 'queue' and p.name = q.queue)
),
levels as (
    select q.queue, q.lim,
           (select min(j.priority) from {schema}.jobs j
            where j.queue = q.queue and j.state in ('ready', 'waiting')) as priority
    from running_queues q
    union all
    select l.queue, l.lim,
           (select min(j.priority) from {schema}.jobs j
            where j.queue = l.queue and j.state in ('ready', 'waiting') and j.priority > l.priority)
    from levels l
    where l.priority is not null
),
due as (
    select l.queue, l.lim, d.id, d.priority, d.run_at_ms
    from levels l
    cross join lateral (
        select j.id, j.priority, j.run_at_ms
        from {schema}.jobs j
        where j.queue = l.queue and j.priority = l.priority and j.state in ('ready', 'waiting')
          and j.run_at_ms <= (select now_ms from params)
          and not exists (select 1 from {schema}.pauses p where p.kind = 'job' and p.name = j.name)
        order by j.run_at_ms, j.id
        limit l.lim
        for update of j skip locked
    ) d
),
rescued as (
    select q.queue, q.lim, r.id, r.priority, r.run_at_ms
    from running_queues q
    cross join lateral (
        select j.id, j.priority, j.run_at_ms
        from {schema}.jobs j
        where j.queue = q.queue and j.state = 'running'
          and j.lease_until_ms <= (select now_ms from params)
          and j.attempt < j.max_attempts
          and not exists (select 1 from {schema}.pauses p where p.kind = 'job' and p.name = j.name)
        order by j.priority, j.run_at_ms, j.id
        limit q.lim
        for update of j skip locked
    ) r
),
candidates as (
    select ranked.id
    from (select u.id, u.priority, u.run_at_ms, u.lim,
                 row_number() over (partition by u.queue order by u.priority, u.run_at_ms, u.id) as rank
          from (select queue, lim, id, priority, run_at_ms from due
                union all
                select queue, lim, id, priority, run_at_ms from rescued) u) ranked
    where ranked.rank <= ranked.lim
    order by ranked.priority, ranked.run_at_ms, ranked.id
    limit (select $5::bigint)
),
claimed as (
    update {schema}.jobs j
    set state = 'running', attempt = j.attempt + 1, claims = j.claims + 1, claimed_by = $4,
        lease_until_ms = p.now_ms + $6::bigint, updated_at_ms = p.now_ms
    from params p
    where j.id in (select id from candidates)
    returning j.id, j.run_id, j.name, j.queue, j.tenant_id, j.payload, j.priority,
              j.attempt, j.max_attempts, j.dead_letter, j.claims, j.lease_until_ms, j.enqueued_by,
              j.traceparent, j.created_at_ms, j.run_at_ms, j.state
)
select false as buried, c.id, c.run_id, c.name, c.queue, c.tenant_id, c.payload, c.priority,
       c.attempt, c.max_attempts, c.dead_letter, c.claims, c.lease_until_ms, c.enqueued_by,
       c.traceparent, c.created_at_ms, c.run_at_ms, c.state
from claimed c
union all
select true, b.id, b.run_id, b.name, b.queue, b.tenant_id, b.payload, null, b.attempt, null, null,
       null, null, null, null, null, null, b.state
from buried b
order by 1, 8, 17, 2;
