-- The event bus. A send stores the event and wakes the matching waits of its tenant, a park
-- registers a wait, looks for a matching event already sent and parks the job: each is one
-- write transaction, so an event sent between a run's last look and its park is never lost.
-- The match itself (top-level keys, deep JSON equality) is decided in Python (event_match).

-- name: event_insert
insert into events (id, tenant, name, payload, sent_at_ms)
values (:id, :tenant, :name, :payload, :now);

-- name: event_candidates
-- The events of a name and tenant since an instant, in (sent_at, id) order.
select id, name, payload, sent_at_ms, tenant
from events
where name = :name and tenant is :tenant and sent_at_ms >= :since_ms
order by sent_at_ms, id;

-- name: waits_of_event
select job_id, run_id, queue, match from event_waits where event = :name and tenant is :tenant;

-- name: wait_drop
delete from event_waits where job_id = :job_id;

-- name: wake_waiting
-- A job parked under this run id, due now (an event's push).
update jobs set run_at_ms = :now, updated_at_ms = :now
where id = :job_id and state = 'waiting' and run_id = :run_id;

-- name: wait_put
insert into event_waits (job_id, run_id, queue, step, event, tenant, match, since_ms, deadline_ms)
values (:job_id, :run_id, :queue, :step, :event, :tenant, :match, :since_ms, :deadline_ms)
on conflict (job_id) do update
set run_id = excluded.run_id, queue = excluded.queue, step = excluded.step,
    event = excluded.event, tenant = excluded.tenant, match = excluded.match,
    since_ms = excluded.since_ms, deadline_ms = excluded.deadline_ms;

-- name: remove_wait
delete from event_waits where run_id = :run_id;
