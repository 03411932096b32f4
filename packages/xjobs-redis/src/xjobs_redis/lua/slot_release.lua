-- slot_release: give the holder's slot back (idempotent); an expired slot is no longer held.
-- KEYS[1]  the slot key's ZSET (member `<job_id>:<claims>` -> expiry)
-- ARGV[1]  now in epoch ms, or '' for the server's clock
-- ARGV[2]  the holder's member `<job_id>:<claims>`
-- reply: 1 when the holder held the slot (now released), else 0

local now = clock_ms(ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
return redis.call('ZREM', KEYS[1], ARGV[2])
