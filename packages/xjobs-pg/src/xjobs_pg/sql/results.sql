-- The result store beside the settles: complete is in settle.sql (the ack with the result),
-- here the read of a job ending and the flag of a result waiter.

-- name: result_read
-- A job ending as a result waiter reads it, in one read.
-- $1 job id.
select state, result, last_error
from {schema}.jobs
where id = $1;

-- name: result_watch
-- Flags a live job watched by a result waiter (the channel to notify when it finishes) and
-- answers its state. A finished or unknown job is left alone and answers nothing: it will not
-- notify, so the waiter reads it at once.
-- $1 job id, $2 the channel.
update {schema}.jobs
set watched = $2
where id = $1 and state in ('ready', 'running', 'waiting')
returning state;
