-- The result store beside the settles: complete is in settle.sql (the ack with the result),
-- here the read of a job ending and the watches of result waiters.

-- name: result_read
-- A job ending as a result waiter reads it, in one read.
-- $1 job id.
select state, result, last_error
from {schema}.jobs
where id = $1;

-- name: result_watch
-- Registers one waiting call (its token) as a watcher of a job, on a row of result_watches, not
-- on the job row: a claim skips a row another statement holds locked, so a watch that updated
-- the job row made a claim racing it pass over the job it just woke for, until its next poll.
-- The watches a waiter left behind (its process died waiting) go with the next watch once expired.
-- $1 job id, $2 the token, $3 the channel, $4 now (null: the server clock), $5 the row lifetime.
with clock as (
    select coalesce($4::bigint, (extract(epoch from now()) * 1000)::bigint) as now_ms
),
swept as (
    delete from {schema}.result_watches w
    using clock c
    where w.expires_at_ms < c.now_ms
)
insert into {schema}.result_watches (job_id, token, channel, expires_at_ms)
select $1, $2, $3, c.now_ms + $5::bigint from clock c
on conflict (job_id, token) do nothing;

-- name: result_state
-- The state of a job once its watch is committed: a finished job will not notify, so the waiter
-- reads it at once. A finishing statement whose snapshot predates the watch sees no watcher and
-- notifies nothing. A job past ready and waiting is read FOR SHARE, so one that holds the row
-- now is waited for and the state it wrote answered. One that takes the row later is found by
-- the reads the waiter makes again into its wait (results.py RECHECK_S, doubling). A ready or
-- waiting job is read without a lock, which a claim would skip it for.
-- $1 job id.
select coalesce(
    (select j.state from {schema}.jobs j
     where j.id = $1 and j.state not in ('ready', 'waiting')
     for share),
    (select j.state from {schema}.jobs j where j.id = $1)
) as state;

-- name: result_unwatch
-- Ends the watch of one waiting call. $1 job id, $2 its token.
delete from {schema}.result_watches
where job_id = $1 and token = $2;
