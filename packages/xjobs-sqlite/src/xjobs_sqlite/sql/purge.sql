-- Retention: each batch deletes at most :limit rows, found by an index walk from the oldest
-- (never a table scan), in the purge's write transaction. A limit of -1 is no limit.

-- name: purge_events
delete from events
where id in (select id from events where sent_at_ms < :before order by sent_at_ms limit :limit);

-- name: purge_waits
delete from event_waits
where job_id in (select job_id from event_waits
                 where deadline_ms is not null and deadline_ms < :before
                 order by deadline_ms limit :limit);

-- name: count_events
select (select count(*) from events where sent_at_ms < :before)
     + (select count(*) from event_waits where deadline_ms is not null and deadline_ms < :before);

-- name: finished_before
-- The oldest finished jobs of one state before a cut (names with a keep of their own left out),
-- or of one name with its own keep (:name), read from jobs_purgeable; a child of a live parent is
-- kept, whatever its age (its result is read when the parent continues).
select id, run_id, finished_at_ms
from jobs
where state = :state and state in ('completed', 'failed', 'dead', 'cancelled')
  and finished_at_ms < :before
  and (:name is null or name = :name)
  and (:name is not null or name not in (select value from json_each(:own)))
  and (parent_id is null
       or not exists (select 1 from jobs p
                      where p.id = jobs.parent_id and p.state in ('ready', 'running', 'waiting')))
order by finished_at_ms, id
limit :limit;

-- name: purge_workers
delete from workers
where id in (select id from workers where expires_at_ms < :before order by expires_at_ms limit :limit);

-- name: count_workers
select count(*) from workers where expires_at_ms < :before;

-- name: purge_counters
-- The buckets of a tier before a cut; a minute bucket only once it is folded.
delete from counters
where (tier, bucket_ms, name, outcome) in (select c.tier, c.bucket_ms, c.name, c.outcome
                from counters c
                where c.tier = :tier and c.bucket_ms < :before
                  and (c.tier <> 'minute'
                       or c.bucket_ms in (select f.bucket_ms from counter_folds f))
                order by c.bucket_ms limit :limit);

-- name: count_counters
select count(*) from counters c
where c.tier = :tier and c.bucket_ms < :before
  and (c.tier <> 'minute' or c.bucket_ms in (select f.bucket_ms from counter_folds f));

-- name: purge_folds
-- A folded mark goes once none of its minute rows is left.
delete from counter_folds
where bucket_ms < :before
  and not exists (select 1 from counters c where c.tier = 'minute' and c.bucket_ms = counter_folds.bucket_ms);
