-- child_park: park a parent on its child group in the parent's slot, fenced as nack is (state
-- running AND the claim): the settle room's nack stored as event_park.lua stores it (waiting,
-- filed in the waiting ZSET and `created`; its attempt; its error; its counter), due at ARGV[6],
-- and the group it waits on noted (`parked_on`, which child_wake.lua checks).
-- KEYS[1]   the job HASH
-- KEYS[2]   ready ZSET of the job's queue
-- KEYS[3]   delayed ZSET of the job's queue
-- KEYS[4]   leased ZSET of the job's queue
-- KEYS[5]   waiting ZSET of the job's queue (its waiting jobs by run_at_ms)
-- KEYS[6]   errors HASH of the job's queue (job id -> its attempt errors)
-- KEYS[7]   the job's queue's minute counters HASH
-- KEYS[8]   the job's queue's minute counters index ZSET
-- KEYS[9]   created ZSET of the job's queue (live jobs by created_at_ms, as lib files them)
-- ARGV[1]   now in epoch ms, or '' for the server's clock
-- ARGV[2]   the claim's worker id
-- ARGV[3]   the claim's claims counter
-- ARGV[4]   the nack's state (waiting)
-- ARGV[5]   '1' when the attempt counts, '0' to hand it back (a park hands it back)
-- ARGV[6]   the nack's run_at in epoch ms, or '' for now
-- ARGV[7]   '1' when the nack carries an error (written to last_error and recorded), else '0'
-- ARGV[8]   the error text
-- ARGV[9]   the job's id (its field in the errors HASH)
-- ARGV[10]  the nack's outcome when it is counted, else ''
-- ARGV[11]  the group's HASH key (the value of `parked_on`)
-- reply: 1 when the fence held and the job parked, 0 when it missed (nothing written)

local now = clock_ms(ARGV[1])
local job = KEYS[1]
if not holds_claim(job, ARGV[2], ARGV[3]) then
  return 0
end
local run_at = ARGV[6] ~= '' and tonumber(ARGV[6]) or now
local f = jget(job, 'attempt', 'name')
drop_lease(job, KEYS[4], ARGV[5] == '1')
reschedule(job, KEYS[2], KEYS[3], ARGV[4], run_at, now)
file_created(job, KEYS[9])
if ARGV[4] == 'waiting' then
  redis.call('ZADD', KEYS[5], run_at, job)
end
if ARGV[7] == '1' then
  redis.call('HSET', job, 'last_error', ARGV[8])
  record_error(KEYS[6], ARGV[9], f[1], ARGV[2], now, ARGV[8])
end
redis.call('HSET', job, 'updated_at_ms', now, 'parked_on', ARGV[11])
count_ending(KEYS[7], KEYS[8], f[2], ARGV[10], now)
return 1
