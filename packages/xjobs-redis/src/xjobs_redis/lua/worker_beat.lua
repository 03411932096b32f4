-- worker_beat: refresh an unexpired registry row (last seen now, expiry now + ARGV[3]); an
-- expired or unknown row is left alone. A claim pass sends this in its own round trip.
-- KEYS[1]  workers ZSET (worker id -> expiry)
-- KEYS[2]  worker_seen HASH (worker id -> last_seen_ms)
-- ARGV[1]  now in epoch ms, or '' for the server's clock
-- ARGV[2]  the worker id
-- ARGV[3]  the row's TTL in ms
-- reply: 1 when the row was there and was refreshed, else 0

local now = clock_ms(ARGV[1])
local expires = redis.call('ZSCORE', KEYS[1], ARGV[2])
if not expires or tonumber(expires) <= now then
  return 0
end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), ARGV[2])
redis.call('HSET', KEYS[2], ARGV[2], now)
return 1
