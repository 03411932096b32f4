-- slot_renew: extend the holder's unexpired slot to now + ARGV[3]; never takes a slot.
-- KEYS[1]  the slot key's ZSET (member `<job_id>:<claims>` -> expiry)
-- ARGV[1]  now in epoch ms, or '' for the server's clock
-- ARGV[2]  the holder's member `<job_id>:<claims>`
-- ARGV[3]  the slot's TTL in ms
-- reply: 1 when the holder still held the slot and it was extended, else 0

local now, server_time = clock_ms(ARGV[1])
local slots, holder = KEYS[1], ARGV[2]
redis.call('ZREMRANGEBYSCORE', slots, '-inf', now)
if not redis.call('ZSCORE', slots, holder) then
  return 0
end
redis.call('ZADD', slots, now + tonumber(ARGV[3]), holder)
expire_with_last_slot(slots, now, server_time)
return 1
