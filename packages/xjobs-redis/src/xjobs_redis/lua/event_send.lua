-- event_send: store an event stamped now, on the events' slot, and answer the queues that may
-- hold a wait for its name (each park adds its queue; the purge drops one with none left): xjobs_redis.events then runs event_wake.lua in each of those
-- queues' slots (a wait lives in its job's queue slot, so no script spans the two).
-- KEYS[1]  the SET of every name's sent ZSET that holds events
-- KEYS[2]  the event name's sent ZSET (event id by sent_at_ms)
-- KEYS[3]  the event payloads HASH (event id -> payload JSON)
-- KEYS[4]  the event name's HASH of the queues that may hold a wait for it (queue -> parks)
-- ARGV[1]  now in epoch ms, or '' for the server's clock
-- ARGV[2]  the event id
-- ARGV[3]  the payload's JSON object
-- reply: {sent_at_ms, queue, ...}

local now = clock_ms(ARGV[1])
redis.call('ZADD', KEYS[2], now, ARGV[2])
redis.call('HSET', KEYS[3], ARGV[2], ARGV[3])
redis.call('SADD', KEYS[1], KEYS[2])
local out = {now}
for _, queue in ipairs(redis.call('HKEYS', KEYS[4])) do
  out[#out + 1] = queue
end
return out
