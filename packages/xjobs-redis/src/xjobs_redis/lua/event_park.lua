-- event_park: register a run's event wait and park its job in one step, fenced as nack is
-- (state running AND the claim), all in the job's queue slot (a wait lives there). The job's
-- earlier wait, if any, is replaced. The park stores the settle room's nack as nack.lua stores a
-- live one (its state, waiting, filed in the waiting ZSET and `created`; its attempt; its error,
-- recorded as the attempt's; its counter when counted), due at ARGV[6]. An event of the wait's
-- name sent before the park is looked for after it (event_find.lua, on the events' slot) and
-- wakes the job (event_wake.lua); one sent after the park wakes it through event_send.lua, which
-- reads the queues of the name's waits after storing the event (xjobs_redis.events: that order
-- loses no event sent between the run's last look and this park).
-- KEYS[1]   the job HASH
-- KEYS[2]   ready ZSET of the job's queue
-- KEYS[3]   delayed ZSET of the job's queue
-- KEYS[4]   leased ZSET of the job's queue
-- KEYS[5]   the queue's waits HASH (job id -> the wait's JSON)
-- KEYS[6]   the queue's waiting SET of the wait's event name (job ids)
-- KEYS[7]   the queue's wait deadlines ZSET (job id by deadline_ms)
-- KEYS[8]   waiting ZSET of the job's queue (its waiting jobs by run_at_ms)
-- KEYS[9]   errors HASH of the job's queue (job id -> its attempt errors)
-- KEYS[10]  the job's queue's minute counters HASH
-- KEYS[11]  the job's queue's minute counters index ZSET
-- KEYS[12]  created ZSET of the job's queue (live jobs by created_at_ms, as lib files them)
-- ARGV[1]   now in epoch ms, or '' for the server's clock
-- ARGV[2]   the claim's worker id
-- ARGV[3]   the claim's claims counter
-- ARGV[4]   the nack's state (waiting)
-- ARGV[5]   '1' when the attempt counts, '0' to hand it back (a park hands it back)
-- ARGV[6]   the nack's run_at in epoch ms, or '' for now
-- ARGV[7]   '1' when the nack carries an error (written to last_error and recorded), else '0'
-- ARGV[8]   the error text
-- ARGV[9]   the waiting job's id (the wait's key in the waits HASH)
-- ARGV[10]  the wait's JSON (its fields, its waiting SET's key and its job's key)
-- ARGV[11]  the wait's deadline_ms, or '' for none
-- ARGV[12]  the nack's outcome when it is counted, else ''
-- reply: 1 when the fence held and the job parked, 0 when it missed (nothing written)

local now = clock_ms(ARGV[1])
local job = KEYS[1]
local waits, deadlines, job_id = KEYS[5], KEYS[7], ARGV[9]
if not holds_claim(job, ARGV[2], ARGV[3]) then
  return 0
end
drop_wait(waits, deadlines, job_id)
redis.call('HSET', waits, job_id, ARGV[10])
redis.call('SADD', KEYS[6], job_id)
if ARGV[11] ~= '' then
  redis.call('ZADD', deadlines, ARGV[11], job_id)
end
local run_at = ARGV[6] ~= '' and tonumber(ARGV[6]) or now
local f = jget(job, 'attempt', 'name')
drop_lease(job, KEYS[4], ARGV[5] == '1')
reschedule(job, KEYS[2], KEYS[3], ARGV[4], run_at, now)
file_created(job, KEYS[12])
if ARGV[4] == 'waiting' then
  redis.call('ZADD', KEYS[8], run_at, job)
end
if ARGV[7] == '1' then
  redis.call('HSET', job, 'last_error', ARGV[8])
  record_error(KEYS[9], job_id, f[1], ARGV[2], now, ARGV[8])
end
redis.call('HSET', job, 'updated_at_ms', now)
count_ending(KEYS[10], KEYS[11], f[2], ARGV[12], now)
return 1
