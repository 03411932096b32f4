-- The bulk verbs: each moves the oldest jobs (by created_at, id) matching a filter, at most a
-- batch a call, and answers how many it moved and how many a further call would find. Each
-- reads jobs_listed one queue and one state at a time (listing.sql binds the filter the same
-- way, $1..$6), in index order: at most the batch from each (twice the batch for retry_many) to
-- sort and pick, and a count of what remains that stops at the cap (COUNT_CAP). No call reads
-- the table beyond its batch and the cap. The driver runs each after index_scans_only, in one
-- transaction, so no misjudged estimate turns a capped scan into a bitmap of a whole state.
-- $7 now, $8 the batch limit, $9 the cap.

-- fragment: bulk_oldest
-- Two CTEs: batch, the $8 oldest rows matching the filter in the queues and states asked and due
-- after the due_after of the CTE params (the smallest bigint but for a promote, which moves only
-- jobs due later than now), and seen, how many such rows there are, counted up to $8 + $9 (the
-- scans of seen are in index order too, so each is an index scan that stops at the count).
batch as (
    select x.id
    from filter_queues f
    cross join unnest($1::text[]) as s(state)
    cross join lateral (
        select j.id, j.created_at_ms
        from {schema}.jobs j, params p
        where j.queue = f.queue and j.state = s.state and {filter_match}
          and j.run_at_ms > p.due_after
        order by j.created_at_ms, j.id
        limit $8
    ) x
    where f.queue is not null
    order by x.created_at_ms, x.id
    limit $8
),
seen as (
    select count(*) as n
    from (select 1
          from filter_queues f
          cross join unnest($1::text[]) as s(state)
          cross join lateral (
              select 1
              from {schema}.jobs j, params p
              where j.queue = f.queue and j.state = s.state and {filter_match}
                and j.run_at_ms > p.due_after
              order by j.created_at_ms, j.id
              limit $8::bigint + $9::bigint
          ) x
          where f.queue is not null
          limit $8::bigint + $9::bigint) c
)

-- name: cancel_many
-- Cancels the batch of live jobs (the driver binds only live states), each as cancel does: with
-- its live descendants that are not detached (children.sql cancel_tree), a child counted into its
-- group. It bumps the minute counters (cancelled) in this statement. moved counts the batch.
-- $1..$6 the filter, $7 now, $8 limit, $9 cap, $10 the error written.
with recursive clock as (
    select coalesce($7::bigint, (extract(epoch from now()) * 1000)::bigint) as now_ms
),
params as (
    select c.now_ms, (-9223372036854775807 - 1)::bigint as due_after from clock c
),
{filter_queues},
{bulk_oldest},
cancel_error as (
    select $10::text as error
),
roots as (
    select b.id from batch b
),
{cancel_tree},
counted as (
    select c.name, 'cancelled' as outcome, c.now_ms from cancelled c
),
{count_minute}
select (select count(*) from cancelled c where c.id in (select b.id from batch b)) as moved,
       (select n from seen) - (select count(*) from batch) as remaining;

-- name: promote_many
-- Makes the batch of ready jobs due later (delayed or retrying) due now, and notifies their
-- queues.
-- $1..$6 the filter, $7 now, $8 limit, $9 cap, $10 channel.
with recursive clock as (
    select coalesce($7::bigint, (extract(epoch from now()) * 1000)::bigint) as now_ms
),
params as (
    select c.now_ms, c.now_ms as due_after from clock c
),
{filter_queues},
{bulk_oldest},
promoted as (
    update {schema}.jobs j
    set run_at_ms = p.now_ms, updated_at_ms = p.now_ms
    from params p
    where j.id in (select b.id from batch b) and j.state = 'ready' and j.run_at_ms > p.now_ms
    returning j.queue
),
woken as (
    select pg_notify($10, w.queue) from (select distinct queue from promoted) w
)
select (select count(*) from promoted) as moved,
       (select n from seen) - (select count(*) from batch) as remaining,
       (select count(*) from woken) as woken;

-- name: remove_many
-- Deletes the batch of finished jobs (the driver binds only finished states) with their steps,
-- attempt errors and event waits.
-- $1..$6 the filter, $7 now, $8 limit, $9 cap.
with recursive clock as (
    select coalesce($7::bigint, (extract(epoch from now()) * 1000)::bigint) as now_ms
),
params as (
    select c.now_ms, (-9223372036854775807 - 1)::bigint as due_after from clock c
),
{filter_queues},
{bulk_oldest},
gone as (
    delete from {schema}.jobs j
    where j.id in (select b.id from batch b)
      and j.state in ('completed', 'failed', 'dead', 'cancelled')
    returning j.id, j.run_id
),
{forget_removed}
select (select count(*) from gone) as moved,
       (select n from seen) - (select count(*) from batch) as remaining;

-- name: retry_many
-- Requeues finished jobs, each as requeue does (ready now, attempts reset, claims kept, result
-- and waiter flag cleared), and
-- notifies their queues. A row whose namespace a live row holds is passed over by the scan (the
-- jobs_live_namespace key, one probe a row), and of rows sharing a namespace only the oldest is
-- picked: the others would be duplicates once it is live, so they are not remaining either. The
-- batch picks among the oldest twice $8 candidates (so a batch whose oldest rows share
-- namespaces still fills), and remaining is the count of distinct namespaces among up to
-- $8 + $9 candidates, less the batch.
-- $1..$6 the filter, $7 now, $8 limit, $9 cap, $10 channel.
with recursive params as (
    select coalesce($7::bigint, (extract(epoch from now()) * 1000)::bigint) as now_ms
),
{filter_queues},
candidates as (
    select x.id, x.created_at_ms, x.name, x.tenant_key, x.idempotency_key
    from filter_queues f
    cross join unnest($1::text[]) as s(state)
    cross join lateral (
        {retry_candidates}
        limit 2 * $8::bigint
    ) x
    where f.queue is not null
    order by x.created_at_ms, x.id
    limit 2 * $8::bigint
),
batch as (
    select ranked.id
    from (select c.id, c.created_at_ms,
                 row_number() over (partition by c.name, c.tenant_key, c.idempotency_key
                                    order by c.created_at_ms, c.id) as nth
          from candidates c) ranked
    where ranked.nth = 1
    order by ranked.created_at_ms, ranked.id
    limit $8
),
seen as (
    select count(distinct (c.name, c.tenant_key, c.idempotency_key)) as n
    from (select x.name, x.tenant_key, x.idempotency_key
          from filter_queues f
          cross join unnest($1::text[]) as s(state)
          cross join lateral (
              {retry_candidates}
              limit $8::bigint + $9::bigint
          ) x
          where f.queue is not null
          limit $8::bigint + $9::bigint) c
),
moved as (
    update {schema}.jobs j
    set state = 'ready', attempt = 0, run_at_ms = p.now_ms, claimed_by = null,
        lease_until_ms = null, finished_at_ms = null, last_error = null, progress = null,
        result = null, watched = null, updated_at_ms = p.now_ms
    from params p
    where j.id in (select b.id from batch b)
      and j.state in ('completed', 'failed', 'dead', 'cancelled')
    returning j.queue
),
woken as (
    select pg_notify($10, w.queue) from (select distinct queue from moved) w
)
select (select count(*) from moved) as moved,
       least(greatest((select n from seen) - (select count(*) from batch), 0), $9)
           as remaining,
       (select count(*) from woken) as woken;

-- fragment: retry_candidates
-- The finished rows of one queue f and state s matching the filter, oldest first, whose
-- namespace no live row holds.
select j.id, j.created_at_ms, j.name, coalesce(j.tenant_id, '') as tenant_key,
               j.idempotency_key
        from {schema}.jobs j
        where j.queue = f.queue and j.state = s.state and {filter_match}
          and not exists (
              select 1 from {schema}.jobs live
              where live.name = j.name and coalesce(live.tenant_id, '') = coalesce(j.tenant_id, '')
                and live.idempotency_key = j.idempotency_key
                and live.state in ('ready', 'running', 'waiting'))
        order by j.created_at_ms, j.id
