-- record_progress: store the run's latest progress, fenced on state running AND the claim.
-- KEYS[1]  the job HASH
-- ARGV[1]  now in epoch ms, or '' for the server's clock
-- ARGV[2]  the claim's worker id
-- ARGV[3]  the claim's claims counter
-- ARGV[4]  the progress (0.0 to 1.0) as the client spelled it
-- reply: 1 when the fence held and the progress was stored, 0 when it missed (nothing written)

local now = clock_ms(ARGV[1])
local job = KEYS[1]
if not holds_claim(job, ARGV[2], ARGV[3]) then
  return 0
end
redis.call('HSET', job, 'progress', ARGV[4], 'updated_at_ms', now)
return 1
