-- worker_forget: remove one worker's registry row (idempotent).
-- KEYS[1]  workers ZSET (worker id -> expiry)
-- KEYS[2]  worker_info HASH
-- KEYS[3]  worker_seen HASH
-- ARGV[1]  the worker id
-- reply: 1 when a row was removed, else 0

local removed = redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('HDEL', KEYS[2], ARGV[1])
redis.call('HDEL', KEYS[3], ARGV[1])
return removed
