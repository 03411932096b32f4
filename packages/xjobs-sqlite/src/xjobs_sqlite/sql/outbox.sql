-- The outbox: staged rows, leased by a relay in one statement, every later write fenced on the
-- lease (claimed_by).

-- name: outbox_stage
insert into outbox (id, run_id, name, queue, tenant_id, idempotency_key, payload, priority,
                    run_at_ms, max_attempts, dead_letter, enqueued_by, traceparent, staged_at_ms)
values (:id, :run_id, :name, :queue, :tenant_id, :idempotency_key, :payload, :priority,
        :run_at_ms, :max_attempts, :dead_letter, :enqueued_by, :traceparent, :now);

-- name: outbox_claim
-- Lease up to :limit unpublished rows whose lease is free or lapsed, oldest staged first.
update outbox set claimed_by = :relay_id, claim_until_ms = :now + :lease_ms
where id in (select c.id from outbox c
             where c.published_at_ms is null
               and (c.claimed_by is null or c.claim_until_ms <= :now)
             order by c.staged_at_ms, c.id
             limit :limit)
returning id, run_id, name, queue, tenant_id, idempotency_key, payload, priority, run_at_ms,
          max_attempts, dead_letter, enqueued_by, traceparent, staged_at_ms;

-- name: outbox_mark
-- The rows this relay still holds, marked published (a lease another relay retook is left).
update outbox set published_at_ms = :now
where id in (select value from json_each(:ids)) and claimed_by = :relay_id
  and published_at_ms is null;

-- name: outbox_purge
-- At most :limit rows published before :before, oldest first.
delete from outbox
where id in (select id from outbox
             where published_at_ms is not null and published_at_ms < :before
             order by published_at_ms limit :limit);

-- name: outbox_count_published
select count(*) from outbox where published_at_ms is not null and published_at_ms < :before;

-- name: outbox_pending
select count(*) from outbox where published_at_ms is null;
