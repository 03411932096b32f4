-- nack: settle a run that did not complete as the settle room decided, fenced on state running
-- AND the claim. The script stores the nack it is handed and derives nothing: a live next state
-- (ready, waiting) is due again at ARGV[6] (now when ''); a terminal one (dead, failed) finishes
-- the job, keeps its run_at, releases its namespace, files it in KEYS[6] and takes it out of
-- `created`; a live one enters `created` (it is no longer in ready in creation order) and, when
-- waiting, the queue's waiting ZSET (score run_at). An
-- uncounted nack hands the claim's attempt back. An error (ARGV[8]) is written to last_error and
-- appended to the job's attempt errors (the claim's attempt, its worker, now); a counted outcome
-- (ARGV[12]) moves its minute counter, in this step. A terminal nack of a watched job publishes
-- its id to the waiter.
-- KEYS[1]   the job HASH
-- KEYS[2]   ready ZSET of the job's queue
-- KEYS[3]   delayed ZSET of the job's queue
-- KEYS[4]   leased ZSET of the job's queue
-- KEYS[5]   live HASH of the job's queue
-- KEYS[6]   the finished ZSET of the next state when it is terminal (untouched otherwise)
-- KEYS[7]   created ZSET of the job's queue (live jobs by created_at_ms, as lib files them)
-- KEYS[8]   waiting ZSET of the job's queue (its waiting jobs by run_at_ms)
-- KEYS[9]   errors HASH of the job's queue (job id -> its attempt errors)
-- KEYS[10]  the queue's minute counters HASH
-- KEYS[11]  the queue's minute counters index ZSET
-- KEYS[12]  steps HASH of the run (the job HASH again when the claim does not name its run)
-- ARGV[1]   now in epoch ms, or '' for the server's clock
-- ARGV[2]   the claim's worker id
-- ARGV[3]   the claim's claims counter
-- ARGV[4]   the next state: ready, waiting, dead or failed
-- ARGV[5]   '1' when the next state is terminal, else '0'
-- ARGV[6]   run_at in epoch ms, or '' for now (a terminal state keeps the job's)
-- ARGV[7]   '1' when the attempt counts, '0' to hand it back
-- ARGV[8]   '1' when the nack carries an error (written to last_error and recorded), else '0'
-- ARGV[9]   the error text
-- ARGV[10]  the job's id (its field in the errors HASH)
-- ARGV[11]  the retention policy's JSON, or '' when retention is off or the run unknown (lib's
--           expire_finished)
-- ARGV[12]  the outcome when it is counted, else ''
-- reply: 1 when the fence held and the job settled (2 when a child's terminal ending was
--        recorded: lib's record_ending), 0 when it missed (nothing written)

local now = clock_ms(ARGV[1])
local job, state = KEYS[1], ARGV[4]
if not holds_claim(job, ARGV[2], ARGV[3]) then
  return 0
end
local f = jget(job, 'attempt', 'name')
local ended = 0
drop_lease(job, KEYS[4], ARGV[7] == '1')
if ARGV[5] == '1' then
  redis.call('HSET', job, 'state', state, 'finished_at_ms', now)
  redis.call('ZREM', KEYS[7], job)
  release_namespace(job, KEYS[5])
  file_finished(job, KEYS[6])
  expire_finished(job, KEYS[12], state, ARGV[11])
  notify_settled(job)
  ended = record_ending(job, state)
else
  local run_at = ARGV[6] ~= '' and tonumber(ARGV[6]) or now
  reschedule(job, KEYS[2], KEYS[3], state, run_at, now)
  file_created(job, KEYS[7])
  if state == 'waiting' then
    redis.call('ZADD', KEYS[8], run_at, job)
  end
end
if ARGV[8] == '1' then
  redis.call('HSET', job, 'last_error', ARGV[9])
  record_error(KEYS[9], ARGV[10], f[1], ARGV[2], now, ARGV[9])
end
redis.call('HSET', job, 'updated_at_ms', now)
count_ending(KEYS[10], KEYS[11], f[2], ARGV[12], now)
return 1 + ended
