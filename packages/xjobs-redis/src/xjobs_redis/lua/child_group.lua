-- child_group: one page of a child group in the group's slot, before its children are written:
-- the group's HASH created by its first page (an existing one kept, never reset), the step
-- listed among its run's groups, and each child's job key filed under its index.
-- KEYS[1]      the group's HASH
-- KEYS[2]      the group's members ZSET (child job key by index)
-- KEYS[3]      the SET of the steps of the parent run that hold a group
-- ARGV[1]      the group's declaration: JSON of parent_id, parent_queue, parent_run_id, step,
--              total, wait, fail_fast, detached
-- ARGV[2]      the index of the page's first child
-- ARGV[2 + r]  the job key of the page's child r
-- reply: 1

local d = cjson.decode(ARGV[1])
if redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('HSET', KEYS[1], 'parent_id', d.parent_id, 'parent_queue', d.parent_queue,
    'parent_run_id', d.parent_run_id, 'step', d.step, 'total', d.total, 'wait', d.wait,
    'fail_fast', d.fail_fast, 'detached', d.detached, 'spawned', 0, 'ended', 0, 'failed', 0)
end
redis.call('SADD', KEYS[3], d.step)
local first = tonumber(ARGV[2])
for r = 3, #ARGV do
  redis.call('ZADD', KEYS[2], 'NX', first + r - 3, ARGV[r])
end
return 1
