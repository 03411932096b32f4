-- nack: settle a run that did not complete as the settle room decided, fenced on state running
-- AND the claim. The script stores the nack it is handed and derives nothing: a live next state
-- (ready, waiting) is due again at ARGV[6] (now when ''); a terminal one (dead, failed) finishes
-- the job, keeps its run_at, releases its namespace and files it in KEYS[6]. An uncounted nack
-- hands the claim's attempt back; last_error is written only when ARGV[8] says so.
-- KEYS[1]  the job HASH
-- KEYS[2]  ready ZSET of the job's queue
-- KEYS[3]  delayed ZSET of the job's queue
-- KEYS[4]  leased ZSET of the job's queue
-- KEYS[5]  live HASH of the job's queue
-- KEYS[6]  the finished ZSET of the next state when it is terminal (untouched otherwise)
-- ARGV[1]  now in epoch ms, or '' for the server's clock
-- ARGV[2]  the claim's worker id
-- ARGV[3]  the claim's claims counter
-- ARGV[4]  the next state: ready, waiting, dead or failed
-- ARGV[5]  '1' when the next state is terminal, else '0'
-- ARGV[6]  run_at in epoch ms, or '' for now (a terminal state keeps the job's)
-- ARGV[7]  '1' when the attempt counts, '0' to hand it back
-- ARGV[8]  '1' when the error is written to last_error, else '0'
-- ARGV[9]  the error text
-- reply: 1 when the fence held and the job settled, 0 when it missed (nothing written)

local now = clock_ms(ARGV[1])
local job, state = KEYS[1], ARGV[4]
if not holds_claim(job, ARGV[2], ARGV[3]) then
  return 0
end
drop_lease(job, KEYS[4], ARGV[7] == '1')
if ARGV[5] == '1' then
  redis.call('HSET', job, 'state', state, 'finished_at_ms', now)
  release_namespace(job, KEYS[5])
  file_finished(job, KEYS[6])
else
  local run_at = ARGV[6] ~= '' and tonumber(ARGV[6]) or now
  reschedule(job, KEYS[2], KEYS[3], state, run_at, now)
end
if ARGV[8] == '1' then
  redis.call('HSET', job, 'last_error', ARGV[9])
end
redis.call('HSET', job, 'updated_at_ms', now)
return 1
