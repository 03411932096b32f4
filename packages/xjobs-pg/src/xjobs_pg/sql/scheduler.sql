-- The scheduler: task watermarks, fires and pauses, and the two leader elections. Each
-- watermark moves only by compare-and-set from the value the scheduler read ($3 null: the task
-- has no row yet, so the move is an insert that any existing row refuses).

-- name: task_watermarks
-- $1 the task names.
select task, watermark_ms from {schema}.task_watermarks where task = any($1::text[]);

-- name: task_arm
-- Moves the watermark of $1 from $2 to $3 without a job, answering a row when it moved.
with armed as (
    insert into {schema}.task_watermarks (task, watermark_ms)
    select $1, $3::bigint where $2::bigint is null
    on conflict (task) do nothing
    returning task
),
advanced as (
    update {schema}.task_watermarks w
    set watermark_ms = $3::bigint
    where w.task = $1 and $2::bigint is not null and w.watermark_ms = $2::bigint
    returning w.task
)
select task from armed
union all
select task from advanced;

-- name: task_fire
-- One statement: move the watermark of $2 from $3 to $4 (the fence), and only if it moved,
-- enqueue the job ($5 to $17) and record the fire. The job insert is the enqueue statement of
-- jobs.sql for one row, and must stay its mirror (a test pins equal rows): deduped on an id that
-- already names a job, and on the live namespace (the conflict target and the live-row lookup
-- spell jobs_live_namespace exactly), with the wake sent only when the row is due now and its
-- queue is among those the caller asks to wake ($18, on channel $19). The fire records the job
-- it landed on, the new row or the one it deduped against. A live row committed after this
-- statement began is a conflict the lookup cannot see: its null job id breaks the not null of
-- task_fires, so the whole statement (the move too) rolls back and the caller runs it again.
with params as (
    select coalesce($1::bigint, (extract(epoch from now()) * 1000)::bigint) as now_ms
),
armed as (
    insert into {schema}.task_watermarks (task, watermark_ms)
    select $2, $4::bigint where $3::bigint is null
    on conflict (task) do nothing
    returning task
),
advanced as (
    update {schema}.task_watermarks w
    set watermark_ms = $4::bigint
    where w.task = $2 and $3::bigint is not null and w.watermark_ms = $3::bigint
    returning w.task
),
moved as (
    select task from armed
    union all
    select task from advanced
),
inserted as (
    insert into {schema}.jobs (id, run_id, name, queue, tenant_id, idempotency_key, payload, priority,
                               run_at_ms, max_attempts, dead_letter, enqueued_by, traceparent,
                               created_at_ms, updated_at_ms)
    select $5::uuid, $6::uuid, $7::text, $8::text, $9::text, $10::text, $11::text, $12::int,
           coalesce($13::bigint, p.now_ms), $14::int, $15::bool, $16::text, $17::text,
           p.now_ms, p.now_ms
    from params p
    where exists (select 1 from moved)
      and not exists (select 1 from {schema}.jobs existing where existing.id = $5::uuid)
    on conflict (name, coalesce(tenant_id, ''), idempotency_key)
        where state in ('ready', 'running', 'waiting')
        do nothing
    returning id, queue, run_at_ms
),
woken as (
    select pg_notify($19, ins.queue)
    from inserted ins, params p
    where ins.run_at_ms <= p.now_ms and ins.queue = any($18::text[])
),
landed as (
    select coalesce(
               (select ins.id from inserted ins),
               (select byid.id from {schema}.jobs byid where byid.id = $5::uuid),
               (select live.id
                from {schema}.jobs live
                where live.name = $7::text
                  and coalesce(live.tenant_id, '') = coalesce($9::text, '')
                  and live.idempotency_key = $10::text
                  and live.state in ('ready', 'running', 'waiting'))
           ) as job_id
    from moved
),
recorded as (
    insert into {schema}.task_fires (task, occurrence_ms, job_id, fired_at_ms)
    select $2, $4::bigint, l.job_id, p.now_ms
    from landed l, params p
    on conflict (task) do update
    set occurrence_ms = excluded.occurrence_ms, job_id = excluded.job_id,
        fired_at_ms = excluded.fired_at_ms
    returning task
)
select exists (select 1 from moved) as moved, (select count(*) from woken) as woken;

-- name: task_fires
-- The last fire of each task in $1, or of every task when $1 is null.
select task, occurrence_ms, job_id, fired_at_ms
from {schema}.task_fires
where $1::text[] is null or task = any($1::text[])
order by task;

-- name: task_paused
-- $1 the task names.
select task from {schema}.task_pauses where task = any($1::text[]);

-- name: task_pause
-- Answers a row only when the task was running (no pause row yet).
-- $1 now, $2 task.
insert into {schema}.task_pauses (task, paused_at_ms)
values ($2, coalesce($1::bigint, (extract(epoch from now()) * 1000)::bigint))
on conflict (task) do nothing
returning task;

-- name: task_resume
-- $1 task.
delete from {schema}.task_pauses where task = $1;

-- name: leader_acquire
-- Takes or renews the lease of election $2 for candidate $3 for $4 ms: a free row is inserted,
-- a row already held by $3 or lapsed is taken over, a live row of another holder is left alone.
-- A row comes back only when $3 holds the lease.
insert into {schema}.leaders (name, holder, expires_at_ms)
values ($2, $3, coalesce($1::bigint, (extract(epoch from now()) * 1000)::bigint) + $4::bigint)
on conflict (name) do update
set holder = excluded.holder, expires_at_ms = excluded.expires_at_ms
where {schema}.leaders.holder = excluded.holder
   or {schema}.leaders.expires_at_ms <= coalesce($1::bigint, (extract(epoch from now()) * 1000)::bigint)
returning holder;

-- name: leader_release
-- $1 election, $2 candidate.
delete from {schema}.leaders where name = $1 and holder = $2;

-- name: advisory_acquire
-- On the dedicated session of an advisory leader: answers whether this session holds the
-- session advisory lock of key $1, taking it when it does not (a lock it holds already is not
-- taken twice, so one unlock releases it).
with k as (
    select hashtextextended($1, 0) as key
),
held as (
    select exists (
        select 1
        from pg_locks l, k
        where l.locktype = 'advisory' and l.pid = pg_backend_pid() and l.granted
          and l.objsubid = 1
          and l.classid = ((k.key >> 32) & 4294967295)::oid
          and l.objid = (k.key & 4294967295)::oid
    ) as held
)
select case when h.held then true else pg_try_advisory_lock(k.key) end as leads
from held h, k;

-- name: advisory_release
select pg_advisory_unlock(hashtextextended($1, 0));
