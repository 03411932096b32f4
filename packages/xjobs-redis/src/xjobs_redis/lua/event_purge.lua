-- event_purge: delete the events sent before ARGV[1] and the waits whose deadline is before it.
-- The names are found from the SET of sent ZSETs, so the purge needs no list of them; a sent
-- ZSET left empty leaves that SET.
-- KEYS[1]  the SET of every name's sent ZSET that holds events
-- KEYS[2]  the event payloads HASH (event id -> payload JSON)
-- KEYS[3]  the waits HASH (job id -> the wait's JSON)
-- KEYS[4]  the wait deadlines ZSET (job id by deadline_ms)
-- ARGV[1]  older_than_ms
-- reply: how many events and waits went

local names, payloads, waits, deadlines = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local before = '(' .. ARGV[1]
local purged = 0
for _, sent in ipairs(redis.call('SMEMBERS', names)) do
  for _, id in ipairs(redis.call('ZRANGEBYSCORE', sent, '-inf', before)) do
    redis.call('HDEL', payloads, id)
    purged = purged + 1
  end
  redis.call('ZREMRANGEBYSCORE', sent, '-inf', before)
  if redis.call('EXISTS', sent) == 0 then
    redis.call('SREM', names, sent)
  end
end
for _, job_id in ipairs(redis.call('ZRANGEBYSCORE', deadlines, '-inf', before)) do
  if drop_wait(waits, deadlines, job_id) then
    purged = purged + 1
  end
end
return purged
