-- event_queues_prune: on the events' slot, drop the queues the purge found holding no wait for
-- a name, each only if no park added it again since the purge read its count (a park stores its
-- wait in its queue's slot BEFORE it counts itself here, so a wait the purge's look missed has
-- moved the count). A name's HASH left empty leaves the SET of them.
-- KEYS[1]      the SET of every name's HASH of queues that exists
-- KEYS[1 + r]  the HASH of queues of the name of pair r (queue -> parks)
-- ARGV[r]      pair r as JSON [queue, the park count the purge read]
-- reply: how many queues were dropped

local dropped = 0
for r = 1, #ARGV do
  local waited = KEYS[1 + r]
  local pair = cjson.decode(ARGV[r])
  if redis.call('HGET', waited, pair[1]) == pair[2] then
    redis.call('HDEL', waited, pair[1])
    dropped = dropped + 1
  end
  if redis.call('EXISTS', waited) == 0 then
    redis.call('SREM', KEYS[1], waited)
  end
end
return dropped
