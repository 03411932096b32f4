-- The worker registry and the fleet concurrency slots.

-- name: worker_sweep
-- Rows that expired go with the next announce.
delete from workers where expires_at_ms <= :now;

-- name: worker_announce
insert into workers (id, host, pid, queues, started_at_ms, last_seen_ms, expires_at_ms)
values (:id, :host, :pid, :queues, :started_at_ms, :now, :now + :ttl_ms)
on conflict (id) do update
set host = excluded.host, pid = excluded.pid, queues = excluded.queues,
    started_at_ms = excluded.started_at_ms, last_seen_ms = excluded.last_seen_ms,
    expires_at_ms = excluded.expires_at_ms;

-- name: worker_beat
update workers set last_seen_ms = :now, expires_at_ms = :now + :ttl_ms
where id = :id and expires_at_ms > :now;

-- name: worker_forget
delete from workers where id = :id;

-- name: worker_list
select id, host, pid, queues, started_at_ms, last_seen_ms
from workers
where expires_at_ms > :now
order by id;

-- name: slot_sweep
-- The lapsed slots of a key go before an acquire counts its holders.
delete from slots where key = :key and expires_at_ms <= :now;

-- name: slot_count
-- The key's holders other than this one, and whether this one holds a slot already.
select coalesce(sum(not (job_id = :job_id and claims = :claims)), 0),
       coalesce(sum(job_id = :job_id and claims = :claims), 0)
from slots
where key = :key;

-- name: slot_take
insert into slots (key, job_id, claims, expires_at_ms)
values (:key, :job_id, :claims, :now + :ttl_ms)
on conflict (key, job_id, claims) do update set expires_at_ms = excluded.expires_at_ms;

-- name: slot_renew
update slots set expires_at_ms = :now + :ttl_ms
where key = :key and job_id = :job_id and claims = :claims and expires_at_ms > :now;

-- name: slot_release
delete from slots
where key = :key and job_id = :job_id and claims = :claims and expires_at_ms > :now;

-- name: slot_holders
select job_id, claims from slots
where key = :key and expires_at_ms > :now
order by job_id, claims;
