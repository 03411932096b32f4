-- The scheduler's state and its leader. Each fire is one write transaction: the watermark's
-- compare-and-set, then, only if it moved, the job's enqueue and the fire record.

-- name: watermark_of
select watermark_ms from task_watermarks where task = :task;

-- name: watermark_first
-- The first watermark of a task (previous null): lands only when the task has none.
insert into task_watermarks (task, watermark_ms) values (:task, :watermark_ms)
on conflict (task) do nothing;

-- name: watermark_move
-- The compare-and-set from the watermark the scheduler read.
update task_watermarks set watermark_ms = :watermark_ms
where task = :task and watermark_ms = :previous_ms;

-- name: fire_record
insert into task_fires (task, occurrence_ms, job_id, fired_at_ms)
values (:task, :occurrence_ms, :job_id, :now)
on conflict (task) do update
set occurrence_ms = excluded.occurrence_ms, job_id = excluded.job_id,
    fired_at_ms = excluded.fired_at_ms;

-- name: fire_rows
select task, occurrence_ms, job_id, fired_at_ms from task_fires order by task;

-- name: task_pause
insert into task_pauses (task, paused_at_ms) values (:task, :now) on conflict (task) do nothing;

-- name: task_resume
delete from task_pauses where task = :task;

-- name: task_pause_rows
select task from task_pauses;

-- name: leader_acquire
-- Take a free or lapsed lease, or renew the holder's own from now; a live one of another
-- candidate is left alone (no row changes).
insert into leaders (name, holder, expires_at_ms) values (:name, :candidate, :now + :ttl_ms)
on conflict (name) do update
set holder = excluded.holder, expires_at_ms = excluded.expires_at_ms
where leaders.holder = excluded.holder or leaders.expires_at_ms <= :now;

-- name: leader_release
delete from leaders where name = :name and holder = :candidate;
