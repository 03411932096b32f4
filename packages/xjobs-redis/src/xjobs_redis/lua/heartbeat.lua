-- heartbeat: extend the lease to now + ARGV[4], fenced on state running AND the claim.
-- KEYS[1]  the job HASH
-- KEYS[2]  leased ZSET of the job's queue
-- ARGV[1]  now in epoch ms, or '' for the server's clock
-- ARGV[2]  the claim's worker id
-- ARGV[3]  the claim's claims counter
-- ARGV[4]  the lease in ms
-- reply: 1 when the fence held and the lease moved, 0 when it missed (nothing written)

local now = clock_ms(ARGV[1])
local job = KEYS[1]
if not holds_claim(job, ARGV[2], ARGV[3]) then
  return 0
end
local lease_until = now + tonumber(ARGV[4])
redis.call('HSET', job, 'lease_until_ms', lease_until, 'updated_at_ms', now)
redis.call('ZADD', KEYS[2], lease_until, job)
return 1
