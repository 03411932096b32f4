-- ack_many: settle many runs of one queue completed, each fenced on its own claim (state running
-- AND claimed_by, claims) exactly as ack.lua settles one (lib's complete_run), in one call: a
-- worker's acks that land together cost one script run a queue, not one each. A run whose fence
-- missed is left as it is (its 0 in the reply); the others settle regardless.
-- KEYS[1]      leased ZSET of the queue
-- KEYS[2]      live HASH of the queue
-- KEYS[3]      completed ZSET of the queue
-- KEYS[4]      created ZSET of the queue (live jobs by created_at_ms, as lib files them)
-- KEYS[5]      the queue's minute counters HASH
-- KEYS[6]      the queue's minute counters index ZSET
-- KEYS[5 + 2r]  run r's job HASH, then (KEYS[6 + 2r]) its steps HASH, or the job HASH again
--               when the claim does not name its run (r = 1 .. (#KEYS - 6) / 2)
-- ARGV[1]      now in epoch ms, or '' for the server's clock
-- ARGV[2]      the retention policy's JSON, or '' when retention is off (lib's expire_finished;
--              a run whose steps key is its job key sets no expiry, as ack.lua is passed '')
-- ARGV[1 + 2r]  run r's claim: its worker id, then (ARGV[2 + 2r]) its claims counter
-- reply: one 1 (the run completed; 2 when a child's ending was recorded) or 0 (its fence missed,
--        nothing written) a run, in order

local now = clock_ms(ARGV[1])
local queue = {KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]}
local out = {}
for r = 1, (#KEYS - 6) / 2 do
  local job, steps = KEYS[5 + 2 * r], KEYS[6 + 2 * r]
  local keep = steps ~= job and ARGV[2] or ''
  out[r] = complete_run(job, steps, queue, ARGV[1 + 2 * r], ARGV[2 + 2 * r], keep, '', now)
end
return out
