-- The transactional outbox. outbox_stage runs on the caller connection, inside the caller
-- transaction, so its rows and its notify land only when that transaction commits. The relay
-- statements run on the pool: a claim is a lease taken in one statement, and every later write
-- is fenced on claimed_by.

-- name: outbox_stage
-- Inserts every row, stamped with the clock ($1, null for the server clock).
-- The wake is sent once, with each payload of $15 (the ones the wake slots let through), only
-- when a staged row is due now. The notify is transactional: a rollback never sends it.
-- $1 now, $2 to $14 the job columns as arrays, $15 the wake payloads, $16 the channel.
with params as (
    select coalesce($1::bigint, (extract(epoch from now()) * 1000)::bigint) as now_ms
),
staged as (
    insert into {schema}.outbox (id, run_id, name, queue, tenant_id, idempotency_key, payload,
                                 priority, run_at_ms, max_attempts, dead_letter, enqueued_by,
                                 traceparent, staged_at_ms)
    select t.id, t.run_id, t.name, t.queue, t.tenant_id, t.idempotency_key, t.payload,
           t.priority, t.run_at_ms, t.max_attempts, t.dead_letter, t.enqueued_by, t.traceparent,
           p.now_ms
    from unnest($2::uuid[], $3::uuid[], $4::text[], $5::text[], $6::text[], $7::text[],
                $8::text[], $9::int[], $10::bigint[], $11::int[], $12::bool[], $13::text[],
                $14::text[])
         as t(id, run_id, name, queue, tenant_id, idempotency_key, payload, priority, run_at_ms,
              max_attempts, dead_letter, enqueued_by, traceparent)
    cross join params p
    returning run_at_ms, staged_at_ms
),
woken as (
    select pg_notify($16, w.payload)
    from unnest($15::text[]) as w(payload)
    where exists (select 1 from staged s
                  where s.run_at_ms is null or s.run_at_ms <= s.staged_at_ms)
)
select (select count(*) from staged) as staged, (select count(*) from woken) as woken;

-- name: outbox_claim
-- Leases up to $3 unpublished rows whose lease is free or lapsed to relay $2 for $4 ms, oldest
-- staged first, each locked with skip locked so two relays never take one row at once. Answers
-- every column of the job, in claim order.
with params as (
    select coalesce($1::bigint, (extract(epoch from now()) * 1000)::bigint) as now_ms
),
claimed as (
    update {schema}.outbox o
    set claimed_by = $2, claim_until_ms = p.now_ms + $4::bigint
    from params p
    where o.id in (
        select c.id
        from {schema}.outbox c
        where c.published_at_ms is null
          and (c.claimed_by is null or c.claim_until_ms <= (select now_ms from params))
        order by c.staged_at_ms, c.id
        limit $3
        for update of c skip locked
    )
    returning o.id, o.run_id, o.name, o.queue, o.tenant_id, o.idempotency_key,
              o.payload, o.priority, o.run_at_ms, o.max_attempts, o.dead_letter,
              o.enqueued_by, o.traceparent, o.staged_at_ms
)
select c.id, c.run_id, c.name, c.queue, c.tenant_id, c.idempotency_key, c.payload, c.priority,
       c.run_at_ms, c.max_attempts, c.dead_letter, c.enqueued_by, c.traceparent
from claimed c
order by c.staged_at_ms, c.id;

-- name: outbox_mark
-- Marks published the rows of $3 that relay $2 still holds (a lease retaken by another relay
-- moved claimed_by, so it is left alone), and in the same statement deletes at most $5 rows
-- published more than $4 ms ago, oldest first. Answers how many it marked and purged.
with params as (
    select coalesce($1::bigint, (extract(epoch from now()) * 1000)::bigint) as now_ms
),
marked as (
    update {schema}.outbox o
    set published_at_ms = p.now_ms
    from params p
    where o.id = any($3::uuid[]) and o.claimed_by = $2 and o.published_at_ms is null
    returning o.id
),
purged as (
    delete from {schema}.outbox o
    where o.id in (
        select x.id
        from {schema}.outbox x
        where x.published_at_ms is not null
          and x.published_at_ms < (select now_ms from params) - $4::bigint
        order by x.published_at_ms
        limit $5
        for update of x skip locked
    )
    returning o.id
)
select (select count(*) from marked) as marked, (select count(*) from purged) as purged;

-- name: outbox_pending
-- The staged rows not yet published, claimed or not.
select count(*) as pending from {schema}.outbox where published_at_ms is null;
