-- nack: settle a run that did not complete, fenced on state running AND the claim.
-- retry and shed go back to ready at ARGV[5] (now when ''), park to waiting until then; dead
-- and fail are terminal (run_at kept). An uncounted nack hands the claim's attempt back; shed
-- never writes last_error, the others write it when an error is given.
-- KEYS[1]  the job HASH
-- KEYS[2]  ready ZSET of the job's queue
-- KEYS[3]  delayed ZSET of the job's queue
-- KEYS[4]  leased ZSET of the job's queue
-- KEYS[5]  live HASH of the job's queue
-- KEYS[6]  dead ZSET of the job's queue
-- KEYS[7]  failed ZSET of the job's queue
-- ARGV[1]  now in epoch ms, or '' for the server's clock
-- ARGV[2]  the claim's worker id
-- ARGV[3]  the claim's claims counter
-- ARGV[4]  the kind: retry, shed, park, dead or fail
-- ARGV[5]  run_at in epoch ms, or '' for now
-- ARGV[6]  '1' when the attempt counts, '0' to hand it back
-- ARGV[7]  '1' when an error is given, else '0'
-- ARGV[8]  the error text
-- reply: 1 when the fence held and the job settled, 0 when it missed (nothing written)

local now = clock_ms(ARGV[1])
local job = KEYS[1]
local kind = ARGV[4]
if not holds_claim(job, ARGV[2], ARGV[3]) then
  return 0
end
drop_lease(job, KEYS[4], ARGV[6] == '1')
if kind == 'retry' or kind == 'shed' or kind == 'park' then
  local state = kind == 'park' and 'waiting' or 'ready'
  local run_at = ARGV[5] ~= '' and tonumber(ARGV[5]) or now
  reschedule(job, KEYS[2], KEYS[3], state, run_at, now)
else
  local state = kind == 'dead' and 'dead' or 'failed'
  redis.call('HSET', job, 'state', state, 'finished_at_ms', now)
  release_namespace(job, KEYS[5])
  file_finished(job, state == 'dead' and KEYS[6] or KEYS[7])
end
if kind ~= 'shed' and ARGV[7] == '1' then
  redis.call('HSET', job, 'last_error', ARGV[8])
end
redis.call('HSET', job, 'updated_at_ms', now)
return 1
