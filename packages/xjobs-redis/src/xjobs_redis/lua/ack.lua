-- ack: settle a run completed, fenced on state running AND the claim (claimed_by, claims); the
-- job leaves the live index by creation and its name's `completed` counter moves, in this step.
-- A body's result (ARGV[5], JSON; '' for none) is stored in the same step (`ResultStore.complete`),
-- and a watched job's id is published to its waiter.
-- KEYS[1]  the job HASH
-- KEYS[2]  leased ZSET of the job's queue
-- KEYS[3]  live HASH of the job's queue
-- KEYS[4]  completed ZSET of the job's queue
-- KEYS[5]  created ZSET of the job's queue (live jobs by created_at_ms, as lib files them)
-- KEYS[6]  the queue's minute counters HASH
-- KEYS[7]  the queue's minute counters index ZSET
-- KEYS[8]  steps HASH of the run (the job HASH again when the claim does not name its run)
-- ARGV[1]  now in epoch ms, or '' for the server's clock
-- ARGV[2]  the claim's worker id
-- ARGV[3]  the claim's claims counter
-- ARGV[4]  the retention policy's JSON, or '' when retention is off or the run unknown (lib's
--          expire_finished)
-- ARGV[5]  the body's result as JSON, or '' for none (a plain ack)
-- reply: 1 when the fence held and the job completed, 0 when it missed (nothing written)

local now = clock_ms(ARGV[1])
local job = KEYS[1]
if not holds_claim(job, ARGV[2], ARGV[3]) then
  return 0
end
redis.call('HSET', job, 'state', 'completed', 'finished_at_ms', now, 'updated_at_ms', now)
redis.call('HDEL', job, 'lease_until_ms')
if ARGV[5] ~= '' then
  redis.call('HSET', job, 'result', ARGV[5])
end
redis.call('ZREM', KEYS[2], job)
redis.call('ZREM', KEYS[5], job)
release_namespace(job, KEYS[3])
file_finished(job, KEYS[4])
expire_finished(job, KEYS[8], 'completed', ARGV[4])
count_ending(KEYS[6], KEYS[7], redis.call('HGET', job, 'name'), 'completed', now)
notify_settled(job)
return 1
