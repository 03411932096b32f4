-- cancel: fenced on the live states (ready, running, waiting); a finished job is left as it is.
-- A running job's holder sees its next heartbeat miss (the state is no longer running).
-- KEYS[1]  the job HASH
-- KEYS[2]  ready ZSET of the job's queue
-- KEYS[3]  delayed ZSET of the job's queue
-- KEYS[4]  leased ZSET of the job's queue
-- KEYS[5]  live HASH of the job's queue
-- KEYS[6]  cancelled ZSET of the job's queue
-- ARGV[1]  now in epoch ms, or '' for the server's clock
-- ARGV[2]  the last_error to store
-- reply: {'missing'} | {'finished', state} | {'cancelled', {field, value, ...}} (the whole job)

local now = clock_ms(ARGV[1])
local job = KEYS[1]
local state = redis.call('HGET', job, 'state')
if not state then
  return {'missing'}
end
if state ~= 'ready' and state ~= 'running' and state ~= 'waiting' then
  return {'finished', state}
end
redis.call('HSET', job, 'state', 'cancelled', 'finished_at_ms', now, 'last_error', ARGV[2],
  'updated_at_ms', now)
redis.call('HDEL', job, 'lease_until_ms')
redis.call('ZREM', KEYS[2], job)
redis.call('ZREM', KEYS[3], job)
redis.call('ZREM', KEYS[4], job)
release_namespace(job, KEYS[5])
file_finished(job, KEYS[6])
return {'cancelled', whole(job)}
