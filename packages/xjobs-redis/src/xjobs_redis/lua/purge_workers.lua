-- purge_workers: one batch of the retention purge of the worker registry: rows that expired
-- before the cut-off, oldest expiry first.
-- KEYS[1]  workers ZSET (worker id -> expiry)
-- KEYS[2]  worker_info HASH
-- KEYS[3]  worker_seen HASH
-- ARGV[1]  the cut-off: a row that expired before it goes
-- ARGV[2]  the most rows to delete
-- ARGV[3]  '1' for the dry run (count, delete nothing), else '0'
-- reply: how many rows went (or would go)

local before = '(' .. ms_text(tonumber(ARGV[1]))
if ARGV[3] == '1' then
  return redis.call('ZCOUNT', KEYS[1], '-inf', before)
end
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', before, 'LIMIT', 0, tonumber(ARGV[2]))
if #ids > 0 then
  redis.call('ZREM', KEYS[1], unpack(ids))
  redis.call('HDEL', KEYS[2], unpack(ids))
  redis.call('HDEL', KEYS[3], unpack(ids))
end
return #ids
