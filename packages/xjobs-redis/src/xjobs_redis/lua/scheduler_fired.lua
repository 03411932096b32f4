-- scheduler_fired: the last step of a fire, on the deployment's slot: once its job is enqueued,
-- the task's pending fire becomes its last fire, with the job that answered (the new one, or the
-- live job holding its namespace). Fenced on the pending fire's occurrence, so a second
-- completion of one fire (a scheduler that found it pending) records nothing.
-- KEYS[1]  the scheduler's pending HASH (task -> JSON {occurrence_ms, fired_at_ms, job})
-- KEYS[2]  the scheduler's fires HASH (task -> JSON {occurrence_ms, job_id, fired_at_ms})
-- ARGV[1]  the task's name
-- ARGV[2]  the pending fire's occurrence in epoch ms
-- ARGV[3]  the id of the job its enqueue answered
-- reply: 1 when the fire was recorded, 0 when it was no longer pending

local raw = redis.call('HGET', KEYS[1], ARGV[1])
if not raw then
  return 0
end
local pending = cjson.decode(raw)
if pending.occurrence_ms ~= tonumber(ARGV[2]) then
  return 0
end
redis.call('HSET', KEYS[2], ARGV[1], cjson.encode({
  occurrence_ms = pending.occurrence_ms, job_id = ARGV[3], fired_at_ms = pending.fired_at_ms,
}))
redis.call('HDEL', KEYS[1], ARGV[1])
return 1
