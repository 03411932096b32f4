-- event_send: store an event stamped now and, in the same step, wake every run waiting for it
-- whose match its payload satisfies: the wait is dropped and, if its job still waits under the
-- wait's run id, the job is due now (run_at now, out of delayed into ready, as a claim promotes).
-- The woken job's keys (its HASH, its queue's ready, delayed and waiting ZSETs) are read from
-- the wait entry, not passed in KEYS: they live on the job's queue slot, so this script runs on
-- a standalone Redis and not on Cluster. (A wait stored before the waiting ZSET existed names
-- none; its job is then only moved.)
-- KEYS[1]  the SET of every name's sent ZSET that holds events
-- KEYS[2]  the event name's sent ZSET (event id by sent_at_ms)
-- KEYS[3]  the event payloads HASH (event id -> payload JSON)
-- KEYS[4]  the waits HASH (job id -> the wait's JSON)
-- KEYS[5]  the event name's waiting SET (job ids)
-- KEYS[6]  the wait deadlines ZSET (job id by deadline_ms)
-- ARGV[1]  now in epoch ms, or '' for the server's clock
-- ARGV[2]  the event id
-- ARGV[3]  the payload's JSON object
-- reply: the event's sent_at_ms

local now = clock_ms(ARGV[1])
local waits, deadlines = KEYS[4], KEYS[6]
redis.call('ZADD', KEYS[2], now, ARGV[2])
redis.call('HSET', KEYS[3], ARGV[2], ARGV[3])
redis.call('SADD', KEYS[1], KEYS[2])
local payload = decode_json(ARGV[3])
for _, job_id in ipairs(redis.call('SMEMBERS', KEYS[5])) do
  local wait = cjson.decode(redis.call('HGET', waits, job_id))
  if json_matches(payload, decode_json(wait.match)) then
    drop_wait(waits, deadlines, job_id)
    local job, ready, delayed, waiting = wait.job, wait.ready, wait.delayed, wait.waiting
    local f = redis.call('HMGET', job, 'state', 'run_id')
    if f[1] == 'waiting' and f[2] == wait.run_id then
      redis.call('HSET', job, 'run_at_ms', now, 'updated_at_ms', now)
      file_ready(job, ready, delayed, now)
      if waiting then
        redis.call('ZADD', waiting, now, job)
      end
    end
  end
end
return now
