-- slot_holders: read-only; the unexpired holders of one slot key.
-- KEYS[1]  the slot key's ZSET (member `<job_id>:<claims>` -> expiry)
-- ARGV[1]  now in epoch ms, or '' for the server's clock
-- reply: the unexpired members `<job_id>:<claims>`

local now = clock_ms(ARGV[1])
return redis.call('ZRANGEBYSCORE', KEYS[1], string.format('(%d', now), '+inf')
