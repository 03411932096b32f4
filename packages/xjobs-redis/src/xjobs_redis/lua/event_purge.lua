-- event_purge: delete the events sent before ARGV[1], on the events' slot (the waits whose
-- deadline fell are dropped queue by queue: wait_lapse.lua). The names are found from the SET
-- of sent ZSETs, so the purge needs no list of them; a sent ZSET left empty leaves that SET. It
-- also answers every name's queues as they stand (each with its park count): xjobs_redis.events
-- then looks in each queue for that name's waits, and event_queues_prune.lua drops the queues
-- that hold none, fenced on the count read here.
-- KEYS[1]  the SET of every name's sent ZSET that holds events
-- KEYS[2]  the event payloads HASH (event id -> payload JSON)
-- KEYS[3]  the SET of every name's HASH of queues (queue -> parks) that exists
-- ARGV[1]  older_than_ms
-- reply: {how many events went, then per queue of a name: that name's HASH key, the queue,
--        its park count}

local names, payloads = KEYS[1], KEYS[2]
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
local out = {purged}
for _, waited in ipairs(redis.call('SMEMBERS', KEYS[3])) do
  local parks = redis.call('HGETALL', waited)
  for i = 1, #parks, 2 do
    out[#out + 1] = waited
    out[#out + 1] = parks[i]
    out[#out + 1] = parks[i + 1]
  end
end
return out
