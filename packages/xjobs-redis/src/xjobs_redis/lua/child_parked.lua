-- child_parked: the first step of a parent's park on its group, in the group's slot: the group
-- marked parked (a child's ending that resolves it from now on wakes the parent), answering
-- whether it resolved already. A group never spawned is neither marked nor resolved.
-- KEYS[1]  the group's HASH
-- (no ARGV)
-- reply: 1 when the group resolved, else 0

if redis.call('EXISTS', KEYS[1]) == 0 then
  return 0
end
redis.call('HSET', KEYS[1], 'parked', '1')
return redis.call('HGET', KEYS[1], 'resolved') == '1' and 1 or 0
