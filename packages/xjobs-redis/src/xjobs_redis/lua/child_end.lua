-- child_end: apply one child's recorded ending to its group, in the group's slot. The child is
-- counted once (its id enters the ended SET once): ended moves, and failed and first_failed when
-- it did not complete. A waiting group resolves (once) when every child ended, or at its first
-- failure when it fails fast. Answers whether the parent is to be woken: the group resolved and
-- the parent parked on it (said again on a repeated delivery: the wake is fenced on the parent).
-- KEYS[1]  the group's HASH
-- KEYS[2]  the group's ended SET (child ids)
-- ARGV[1]  the child's id
-- ARGV[2]  the child's index
-- ARGV[3]  the child's finished state
-- reply: {1, parent_queue, parent_id, parent_run_id} to wake the parent, else {0}

local group = KEYS[1]
if redis.call('EXISTS', group) == 0 then
  return {0}
end
if redis.call('SADD', KEYS[2], ARGV[1]) == 1 then
  redis.call('HINCRBY', group, 'ended', 1)
  if ARGV[3] ~= 'completed' then
    redis.call('HINCRBY', group, 'failed', 1)
    redis.call('HSETNX', group, 'first_failed', ARGV[2])
  end
end
local g = redis.call('HMGET', group, 'wait', 'fail_fast', 'resolved', 'ended', 'failed', 'total',
  'parked', 'parent_queue', 'parent_id', 'parent_run_id')
if g[1] ~= '1' then
  return {0}
end
local resolved = g[3] == '1'
if not resolved and (tonumber(g[4]) >= tonumber(g[6]) or (g[2] == '1' and tonumber(g[5]) > 0)) then
  redis.call('HSET', group, 'resolved', '1')
  resolved = true
end
if resolved and g[7] == '1' then
  return {1, g[8], g[9], g[10]}
end
return {0}
