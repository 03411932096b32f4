-- event_park: register a run's event wait and park its job in one step, fenced as nack is
-- (state running AND the claim). The job's earlier wait, if any, is replaced. The park is
-- nack's: waiting, the attempt handed back, due at ARGV[4], or now when an event of the wait's
-- name matching it was sent at or after its since_ms (so an event sent between the run's last
-- look and this park is not lost). The job's keys and the event keys are on two slots, so this
-- script runs on a standalone Redis and not on Cluster.
-- KEYS[1]  the job HASH
-- KEYS[2]  ready ZSET of the job's queue
-- KEYS[3]  delayed ZSET of the job's queue
-- KEYS[4]  leased ZSET of the job's queue
-- KEYS[5]  the waits HASH (job id -> the wait's JSON)
-- KEYS[6]  the wait's event name's waiting SET (job ids)
-- KEYS[7]  the wait deadlines ZSET (job id by deadline_ms)
-- KEYS[8]  the wait's event name's sent ZSET (event id by sent_at_ms)
-- KEYS[9]  the event payloads HASH (event id -> payload JSON)
-- ARGV[1]  now in epoch ms, or '' for the server's clock
-- ARGV[2]  the claim's worker id
-- ARGV[3]  the claim's claims counter
-- ARGV[4]  run_at in epoch ms when no stored event matches
-- ARGV[5]  the waiting job's id (the wait's key in the waits HASH)
-- ARGV[6]  the wait's JSON (its fields, its event's waiting SET, its job's keys)
-- ARGV[7]  the wait's match (a JSON object)
-- ARGV[8]  the wait's since_ms
-- ARGV[9]  the wait's deadline_ms, or '' for none
-- reply: 1 when the fence held and the job parked, 0 when it missed (nothing written)

local now = clock_ms(ARGV[1])
local job = KEYS[1]
local waits, deadlines, job_id = KEYS[5], KEYS[7], ARGV[5]
if not holds_claim(job, ARGV[2], ARGV[3]) then
  return 0
end
drop_wait(waits, deadlines, job_id)
redis.call('HSET', waits, job_id, ARGV[6])
redis.call('SADD', KEYS[6], job_id)
if ARGV[9] ~= '' then
  redis.call('ZADD', deadlines, ARGV[9], job_id)
end
local run_at = tonumber(ARGV[4])
if first_match(KEYS[8], KEYS[9], decode_json(ARGV[7]), ARGV[8]) then
  run_at = now
end
drop_lease(job, KEYS[4], false)
reschedule(job, KEYS[2], KEYS[3], 'waiting', run_at, now)
redis.call('HSET', job, 'updated_at_ms', now)
return 1
