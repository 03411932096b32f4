-- worker_announce: write (or overwrite) one worker's registry row, last seen now, expiring
-- ARGV[4] ms later; rows that already expired are swept on the way.
-- KEYS[1]  workers ZSET (worker id -> expiry)
-- KEYS[2]  worker_info HASH (worker id -> JSON of host, pid, queues, started_at_ms)
-- KEYS[3]  worker_seen HASH (worker id -> last_seen_ms)
-- ARGV[1]  now in epoch ms, or '' for the server's clock
-- ARGV[2]  the worker id
-- ARGV[3]  the worker's JSON info
-- ARGV[4]  the row's TTL in ms
-- reply: the row's last_seen_ms

local now = clock_ms(ARGV[1])
local workers, info, seen = KEYS[1], KEYS[2], KEYS[3]
for _, gone in ipairs(redis.call('ZRANGEBYSCORE', workers, '-inf', now)) do
  redis.call('HDEL', info, gone)
  redis.call('HDEL', seen, gone)
end
redis.call('ZREMRANGEBYSCORE', workers, '-inf', now)
redis.call('HSET', info, ARGV[2], ARGV[3])
redis.call('HSET', seen, ARGV[2], now)
redis.call('ZADD', workers, now + tonumber(ARGV[4]), ARGV[2])
return now
