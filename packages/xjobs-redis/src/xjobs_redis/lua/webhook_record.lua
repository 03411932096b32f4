-- webhook_record: append one delivery attempt to its endpoint's LIST (newest first, trimmed to
-- the newest ARGV[5]) and move the endpoint's state: a delivery ends the run of failures, a failed
-- or rejected attempt extends it and disables the endpoint once the run reaches ARGV[4], a
-- skipped one leaves it; a disabled endpoint stays disabled.
-- KEYS[1]  the endpoint's state HASH (failures, disabled_at_ms)
-- KEYS[2]  the endpoint's attempts LIST
-- ARGV[1]  the attempt's JSON
-- ARGV[2]  its status: delivered, failed, rejected or skipped
-- ARGV[3]  its instant in epoch ms
-- ARGV[4]  disable after this many failures in a row
-- ARGV[5]  how many attempts the endpoint keeps
-- reply: {failures, disabled_at_ms or ''}

local state, attempts = KEYS[1], KEYS[2]
local status = ARGV[2]
local failing = status == 'failed' or status == 'rejected'
local failures = tonumber(redis.call('HGET', state, 'failures') or '0')
if status == 'delivered' then
  failures = 0
elseif failing then
  failures = failures + 1
end
local disabled = redis.call('HGET', state, 'disabled_at_ms')
if not disabled and failing and failures >= tonumber(ARGV[4]) then
  disabled = ARGV[3]
  redis.call('HSET', state, 'disabled_at_ms', disabled)
end
redis.call('HSET', state, 'failures', failures)
redis.call('LPUSH', attempts, ARGV[1])
redis.call('LTRIM', attempts, 0, tonumber(ARGV[5]) - 1)
return {failures, disabled or ''}
