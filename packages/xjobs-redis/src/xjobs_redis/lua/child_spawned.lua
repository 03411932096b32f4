-- child_spawned: after a page's children were written, the group's `spawned` count moves up to
-- the page's end (never down: a replayed page moves nothing), in the group's slot.
-- KEYS[1]  the group's HASH
-- ARGV[1]  the index after the page's last child
-- reply: the group's spawned count after it

local spawned = tonumber(redis.call('HGET', KEYS[1], 'spawned') or '0')
local upto = tonumber(ARGV[1])
if upto > spawned then
  redis.call('HSET', KEYS[1], 'spawned', upto)
  spawned = upto
end
return spawned
