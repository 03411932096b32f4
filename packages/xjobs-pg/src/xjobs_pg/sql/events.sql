-- The event bus. A send and a park of one event name serialise on event_lock, taken by its own
-- statement first: each later statement of the transaction reads a snapshot taken after the
-- lock, so a park sees every event sent before it and a send sees every wait parked before it.
-- The match rule (event_match.py): each top-level key of the match is in the payload with an
-- equal jsonb value (numbers by exact numeric value, so a 64-bit id equals only itself, a boolean
-- never a number, objects deep and unordered). Events are scoped by tenant: a send wakes and a
-- look reads only the rows of its own tenant (the empty string is the untenanted scope).

-- name: event_lock
-- $1 the event name.
select pg_advisory_xact_lock(hashtextextended('{schema}.event:' || $1, 0));

-- name: event_now
-- The bus clock when it is the server: the time now, not the start of a transaction.
select (extract(epoch from clock_timestamp()) * 1000)::bigint as now_ms;

-- name: event_send
-- Under event_lock: stores the event stamped with the bus clock ($1, null for the server clock
-- read under the lock), drops the waits of its tenant it matches, and makes their jobs due now if
-- they still wait under the run id of the wait. Answers the event and the queues of the jobs it
-- woke. $2 id, $3 name, $4 payload, $5 tenant.
with params as (
    select coalesce($1::bigint, (extract(epoch from clock_timestamp()) * 1000)::bigint) as now_ms
),
sent as (
    insert into {schema}.events (id, name, payload, sent_at_ms, tenant)
    select $2, $3, $4::jsonb, p.now_ms, $5 from params p
    returning id, name, payload, sent_at_ms, tenant
),
matched as (
    delete from {schema}.event_waits w
    using sent e
    where w.tenant = e.tenant and w.event = e.name
      and not exists (select 1 from jsonb_each(w.match) m
                      where (e.payload -> m.key) is distinct from m.value)
    returning w.job_id, w.run_id
),
woken as (
    update {schema}.jobs j
    set run_at_ms = p.now_ms, updated_at_ms = p.now_ms
    from matched w, params p
    where j.id = w.job_id and j.run_id = w.run_id and j.state = 'waiting'
    returning j.queue
)
select e.id, e.sent_at_ms,
       coalesce((select array_agg(distinct queue order by queue) from woken), '{}') as queues
from sent e;

-- name: event_wake
-- Under event_lock, after event_send: one notify per woken queue the wake slots let through,
-- the payload the queue name, as an enqueue sends it.
-- $1 channel, $2 the woken queues.
select pg_notify($1, q.queue) from unnest($2::text[]) as q(queue);

-- name: event_find
-- The earliest event of $1 in tenant $4 matching $2 sent at or after $3, in (sent_at, id) order.
select e.id, e.name, e.payload::text as payload, e.sent_at_ms
from {schema}.events e
where e.tenant = $4 and e.name = $1 and e.sent_at_ms >= $3
  and not exists (select 1 from jsonb_each($2::jsonb) m
                  where (e.payload -> m.key) is distinct from m.value)
order by e.sent_at_ms, e.id
limit 1;

-- name: event_register
-- Under event_lock, before the park: writes the wait of the job (replacing its earlier one)
-- and answers whether an event of its tenant matching it was sent at or after its start, so the
-- park makes the job due now instead of losing that event.
-- $1 job id, $2 run id, $3 queue, $4 step, $5 event, $6 match, $7 since, $8 deadline, $9 tenant.
with registered as (
    insert into {schema}.event_waits (job_id, run_id, queue, step, event, match, since_ms,
                                      deadline_ms, tenant)
    values ($1, $2, $3, $4, $5, $6::jsonb, $7, $8, $9)
    on conflict (job_id) do update
    set run_id = excluded.run_id, queue = excluded.queue, step = excluded.step,
        event = excluded.event, match = excluded.match, since_ms = excluded.since_ms,
        deadline_ms = excluded.deadline_ms, tenant = excluded.tenant
    returning job_id
)
select exists (
    select 1
    from {schema}.events e
    where e.tenant = $9 and e.name = $5 and e.sent_at_ms >= $7
      and not exists (select 1 from jsonb_each($6::jsonb) m
                      where (e.payload -> m.key) is distinct from m.value)
) as sent, (select count(*) from registered) as registered;
