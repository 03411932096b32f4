-- The claim pass: the burial of exhausted lapsed leases, then the claim itself, ONE update that
-- sets the lease and the fence (attempt + 1, claims + 1, claimed_by, lease_until_ms) of up to
-- :limit_N due jobs of each asked queue and :total in all, in claim order (priority, run_at,
-- id). Both run in the pass's BEGIN IMMEDIATE transaction, so no other writer of any process
-- runs between them and no row is claimed twice.

-- name: refresh_presence
-- A registered worker's presence rides its claim (ClaimOptions.presence_ttl_ms), once a third of
-- its TTL passed since the last refresh: an idle worker's claim pass then writes nothing at all
-- (no page, no WAL frame, no data_version move that would wake every other process).
update workers set last_seen_ms = :now, expires_at_ms = :now + :presence_ttl_ms
where id = :worker_id and expires_at_ms > :now and last_seen_ms <= :now - :presence_ttl_ms / 3;

-- name: bury_lapsed
-- A running job of an asked queue whose lease lapsed on its final attempt is settled dead (or
-- failed, without dead letter), never handed out again (jobs_leased serves the scan).
update jobs
set state = case when dead_letter = 1 then 'dead' else 'failed' end,
    finished_at_ms = :now, lease_until_ms = null, last_error = :error, updated_at_ms = :now
where state = 'running' and queue in (select value from json_each(:queues))
  and lease_until_ms <= :now and attempt >= max_attempts
returning id, run_id, name, queue, tenant_id, payload, state, attempt, claims, claimed_by;

-- name: claim_head
-- The claim's update up to the union of its candidates (a claim_queue block per asked queue).
update jobs
set state = 'running', attempt = attempt + 1, claims = claims + 1, claimed_by = :worker_id,
    lease_until_ms = :now + :lease_ms, updated_at_ms = :now
where id in (
    select id from (
        select id, priority, run_at_ms, lim,
               row_number() over (partition by queue order by priority, run_at_ms, id) as rank
        from (

-- name: claim_queue
-- The candidates of queue N (:queue_N, at most :limit_N): its due rows read from jobs_claimable
-- in claim order and its lapsed leases short of their final attempt read from jobs_leased, each
-- scan stopped at the limit. A paused queue gives none, a paused job name is passed over.
-- The due rows are read one priority at a time: the priorities the queue holds are found by a
-- loose scan (levels, one descent of jobs_claimable each), and the IN over them makes run_at a
-- bound of each priority's range, not a filter, so a scan stops at the first job not due yet
-- however many delayed jobs sit behind it (in claim order still: no sort). A claim of an idle
-- queue beside 200,000 delayed jobs read every one of them (97 ms, against 0.4 ms).
select id, queue, priority, run_at_ms, lim from (
    select j.id, j.queue, j.priority, j.run_at_ms, :limit_N as lim
    from jobs j
    where j.queue = :queue_N and j.state in ('ready', 'waiting') and j.run_at_ms <= :now
      and j.priority in (
          with recursive levels(priority) as (
              select min(l.priority) from jobs l
              where l.queue = :queue_N and l.state in ('ready', 'waiting')
              union all
              select (select min(l.priority) from jobs l
                      where l.queue = :queue_N and l.state in ('ready', 'waiting')
                        and l.priority > levels.priority)
              from levels where levels.priority is not null
          )
          select priority from levels where priority is not null)
      and not exists (select 1 from pauses p where p.kind = 'queue' and p.name = :queue_N)
      and not exists (select 1 from pauses p where p.kind = 'job' and p.name = j.name)
    order by j.priority, j.run_at_ms, j.id
    limit :limit_N)
union all
select id, queue, priority, run_at_ms, lim from (
    select j.id, j.queue, j.priority, j.run_at_ms, :limit_N as lim
    from jobs j
    where j.queue = :queue_N and j.state = 'running' and j.lease_until_ms <= :now
      and j.attempt < j.max_attempts
      and not exists (select 1 from pauses p where p.kind = 'queue' and p.name = :queue_N)
      and not exists (select 1 from pauses p where p.kind = 'job' and p.name = j.name)
    order by j.priority, j.run_at_ms, j.id
    limit :limit_N)

-- name: claim_tail
-- The rest of the claim: each queue's first :limit_N candidates, then :total in claim order.
        )
    )
    where rank <= lim
    order by priority, run_at_ms, id
    limit :total
)
returning id, run_id, name, queue, tenant_id, payload, priority, attempt, max_attempts,
          dead_letter, claims, lease_until_ms, enqueued_by, traceparent, created_at_ms, run_at_ms;
