-- requeue: put one finished job back to ready, due now, attempts reset (claims never reset, so
-- an old claim stays fenced out), unless it is missing, live, or a live job holds its namespace.
-- KEYS[1]  the job HASH
-- KEYS[2]  ready ZSET of the job's queue
-- KEYS[3]  live HASH of the job's queue
-- KEYS[4]  completed ZSET of the job's queue
-- KEYS[5]  failed ZSET of the job's queue
-- KEYS[6]  dead ZSET of the job's queue
-- KEYS[7]  cancelled ZSET of the job's queue
-- ARGV[1]  now in epoch ms, or '' for the server's clock
-- reply: {'missing'} | {'live', state} | {'duplicate', holder job id}
--        | {'requeued', {field, value, ...}} (the whole job)

local now = clock_ms(ARGV[1])
local job = KEYS[1]
local state = redis.call('HGET', job, 'state')
if not state then
  return {'missing'}
end
if state == 'ready' or state == 'running' or state == 'waiting' then
  return {'live', state}
end
local namespace = namespace_of(job)
local holder = redis.call('HGET', KEYS[3], namespace)
if holder then
  return {'duplicate', redis.call('HGET', holder, 'id') or ''}
end
redis.call('HSET', job, 'state', 'ready', 'attempt', 0, 'run_at_ms', now, 'updated_at_ms', now)
redis.call('HDEL', job, 'claimed_by', 'lease_until_ms', 'finished_at_ms', 'last_error', 'progress')
for k = 4, 7 do
  redis.call('ZREM', KEYS[k], job)
end
redis.call('ZADD', KEYS[2], ready_score(redis.call('HGET', job, 'priority'), now), job)
redis.call('HSET', KEYS[3], namespace, job)
return {'requeued', whole(job)}
