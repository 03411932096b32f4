-- event_park: register a run's event wait and park its job in one step, fenced as nack is
-- (state running AND the claim). The job's earlier wait, if any, is replaced. The park stores
-- the settle room's nack as nack.lua stores a live one (its state, waiting, filed in the waiting
-- ZSET and `created`; its attempt; its error, recorded as the attempt's; its counter when
-- counted), due at
-- ARGV[6], or now when an event of the wait's name matching it was sent at or after its since_ms
-- (so an event sent between the run's last look and this park is not lost).
-- The job's keys and the event keys are on two slots, so this script runs on a standalone
-- Redis and not on Cluster.
-- KEYS[1]   the job HASH
-- KEYS[2]   ready ZSET of the job's queue
-- KEYS[3]   delayed ZSET of the job's queue
-- KEYS[4]   leased ZSET of the job's queue
-- KEYS[5]   the waits HASH (job id -> the wait's JSON)
-- KEYS[6]   the wait's event name's waiting SET (job ids)
-- KEYS[7]   the wait deadlines ZSET (job id by deadline_ms)
-- KEYS[8]   the wait's event name's sent ZSET (event id by sent_at_ms)
-- KEYS[9]   the event payloads HASH (event id -> payload JSON)
-- KEYS[10]  waiting ZSET of the job's queue (its waiting jobs by run_at_ms)
-- KEYS[11]  errors HASH of the job's queue (job id -> its attempt errors)
-- KEYS[12]  the job's queue's minute counters HASH
-- KEYS[13]  the job's queue's minute counters index ZSET
-- KEYS[14]  created ZSET of the job's queue (live jobs by created_at_ms, as lib files them)
-- ARGV[1]   now in epoch ms, or '' for the server's clock
-- ARGV[2]   the claim's worker id
-- ARGV[3]   the claim's claims counter
-- ARGV[4]   the nack's state (waiting)
-- ARGV[5]   '1' when the attempt counts, '0' to hand it back (a park hands it back)
-- ARGV[6]   the nack's run_at in epoch ms, or '' for now, when no stored event matches
-- ARGV[7]   '1' when the nack carries an error (written to last_error and recorded), else '0'
-- ARGV[8]   the error text
-- ARGV[9]   the waiting job's id (the wait's key in the waits HASH)
-- ARGV[10]  the wait's JSON (its fields, its event's waiting SET, its job's keys)
-- ARGV[11]  the wait's match (a JSON object)
-- ARGV[12]  the wait's since_ms
-- ARGV[13]  the wait's deadline_ms, or '' for none
-- ARGV[14]  the nack's outcome when it is counted, else ''
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
if ARGV[13] ~= '' then
  redis.call('ZADD', deadlines, ARGV[13], job_id)
end
local run_at = ARGV[6] ~= '' and tonumber(ARGV[6]) or now
if first_match(KEYS[8], KEYS[9], decode_json(ARGV[11]), ARGV[12]) then
  run_at = now
end
local f = redis.call('HMGET', job, 'attempt', 'name')
drop_lease(job, KEYS[4], ARGV[5] == '1')
reschedule(job, KEYS[2], KEYS[3], ARGV[4], run_at, now)
file_created(job, KEYS[14])
if ARGV[4] == 'waiting' then
  redis.call('ZADD', KEYS[10], run_at, job)
end
if ARGV[7] == '1' then
  redis.call('HSET', job, 'last_error', ARGV[8])
  record_error(KEYS[11], job_id, f[1], ARGV[2], now, ARGV[8])
end
redis.call('HSET', job, 'updated_at_ms', now)
count_ending(KEYS[12], KEYS[13], f[2], ARGV[14], now)
return 1
