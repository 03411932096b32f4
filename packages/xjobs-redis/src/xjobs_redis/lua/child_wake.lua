-- child_wake: wake a parent whose child group resolved, in the parent's slot: only while it
-- waits under the group's run id AND is parked on that group (`parked_on`, consumed here), so a
-- repeated wake never makes a parent that moved on due early. The parent is due now (out of
-- delayed into ready, as a claim promotes) and its queue's name is published on the wake channel.
-- KEYS[1]  the parent's job HASH
-- KEYS[2]  ready ZSET of the parent's queue
-- KEYS[3]  delayed ZSET of the parent's queue
-- KEYS[4]  waiting ZSET of the parent's queue (its waiting jobs by run_at_ms)
-- ARGV[1]  now in epoch ms, or '' for the server's clock
-- ARGV[2]  the group's parent run id
-- ARGV[3]  the group's HASH key (what `parked_on` holds)
-- ARGV[4]  the wake channel
-- ARGV[5]  the parent's queue name
-- reply: 1 when the parent was made due, else 0

local now = clock_ms(ARGV[1])
local job = KEYS[1]
local f = jget(job, 'state', 'run_id')
if f[1] ~= 'waiting' or f[2] ~= ARGV[2] or redis.call('HGET', job, 'parked_on') ~= ARGV[3] then
  return 0
end
redis.call('HDEL', job, 'parked_on')
redis.call('HSET', job, 'run_at_ms', now, 'updated_at_ms', now)
file_ready(job, KEYS[2], KEYS[3], now)
redis.call('ZADD', KEYS[4], now, job)
redis.call('PUBLISH', ARGV[4], ARGV[5])
return 1
