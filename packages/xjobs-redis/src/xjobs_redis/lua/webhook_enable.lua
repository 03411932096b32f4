-- webhook_enable: enable one webhook endpoint again and end its run of failures.
-- KEYS[1]  the endpoint's state HASH (failures, disabled_at_ms)
-- ARGV: none
-- reply: 1 when the endpoint was disabled, else 0

local state = KEYS[1]
local was = redis.call('HEXISTS', state, 'disabled_at_ms')
if redis.call('EXISTS', state) == 1 then
  redis.call('HDEL', state, 'disabled_at_ms')
  redis.call('HSET', state, 'failures', 0)
end
return was
