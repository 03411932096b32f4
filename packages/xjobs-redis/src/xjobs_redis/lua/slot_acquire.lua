-- slot_acquire: take a fleet concurrency slot of one key unless ARGV[3] unexpired holders have
-- one already; the holder's own unexpired slot counts once (and is extended). A limit of 0 or
-- less refuses every acquire. Expired slots are removed first.
-- KEYS[1]  the slot key's ZSET (member `<job_id>:<claims>` -> expiry)
-- ARGV[1]  now in epoch ms, or '' for the server's clock
-- ARGV[2]  the holder's member `<job_id>:<claims>`
-- ARGV[3]  the limit
-- ARGV[4]  the slot's TTL in ms
-- reply: 1 when the holder has the slot now, else 0

local now, server_time = clock_ms(ARGV[1])
local slots, holder, limit = KEYS[1], ARGV[2], tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', slots, '-inf', now)
if limit <= 0 then
  return 0
end
if not redis.call('ZSCORE', slots, holder) and redis.call('ZCARD', slots) >= limit then
  return 0
end
redis.call('ZADD', slots, now + tonumber(ARGV[4]), holder)
expire_with_last_slot(slots, now, server_time)
return 1
