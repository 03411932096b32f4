-- event_wake: in one queue's slot, wake the runs waiting for an event whose match its payload
-- satisfies (every waiting job of the name, or the one job named): the wait is dropped and, if
-- its job still waits under the wait's run id, the job is due now (run_at now, out of delayed
-- into ready, as a claim promotes). A send runs it in each queue event_send.lua answers; a park
-- runs it for its own job when an event already sent matches (event_find.lua).
-- KEYS[1]  the queue's waits HASH (job id -> the wait's JSON)
-- KEYS[2]  the queue's waiting SET of the event name (job ids)
-- KEYS[3]  the queue's wait deadlines ZSET (job id by deadline_ms)
-- KEYS[4]  ready ZSET of the queue
-- KEYS[5]  delayed ZSET of the queue
-- KEYS[6]  waiting ZSET of the queue (its waiting jobs by run_at_ms)
-- ARGV[1]  now in epoch ms, or '' for the server's clock
-- ARGV[2]  the event's payload JSON object
-- ARGV[3]  the one job id to look at, or '' for every waiting job of the name
-- reply: how many jobs were made due

local now = clock_ms(ARGV[1])
local waits, deadlines = KEYS[1], KEYS[3]
local ids
if ARGV[3] == '' then
  ids = redis.call('SMEMBERS', KEYS[2])
elseif redis.call('SISMEMBER', KEYS[2], ARGV[3]) == 1 then
  ids = {ARGV[3]}
else
  ids = {}
end
local payload = decode_json(ARGV[2])
local woken = 0
for _, job_id in ipairs(ids) do
  local wait = cjson.decode(redis.call('HGET', waits, job_id))
  if json_matches(payload, decode_json(wait.match)) then
    drop_wait(waits, deadlines, job_id)
    local job = wait.job
    local f = jget(job, 'state', 'run_id')
    if f[1] == 'waiting' and f[2] == wait.run_id then
      redis.call('HSET', job, 'run_at_ms', now, 'updated_at_ms', now)
      file_ready(job, KEYS[4], KEYS[5], now)
      redis.call('ZADD', KEYS[6], now, job)
      woken = woken + 1
    end
  end
end
return woken
