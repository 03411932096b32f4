-- wait_lapse: in one queue's slot, drop the event waits whose deadline is before ARGV[1] (the
-- events' purge runs it in every queue).
-- KEYS[1]  the queue's waits HASH (job id -> the wait's JSON)
-- KEYS[2]  the queue's wait deadlines ZSET (job id by deadline_ms)
-- ARGV[1]  older_than_ms
-- reply: how many waits went

local purged = 0
for _, job_id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', '(' .. ARGV[1])) do
  if drop_wait(KEYS[1], KEYS[2], job_id) then
    purged = purged + 1
  end
end
return purged
