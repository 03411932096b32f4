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
-- reply: 1 when the fence held and the job completed (2 when a child's ending was recorded:
--        lib's record_ending), 0 when it missed (nothing written)

local now = clock_ms(ARGV[1])
local queue = {KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7]}
return complete_run(KEYS[1], KEYS[8], queue, ARGV[2], ARGV[3], ARGV[4], ARGV[5], now)
