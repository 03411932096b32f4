-- worker_list: read-only; the registry rows that have not expired.
-- KEYS[1]  workers ZSET (worker id -> expiry)
-- KEYS[2]  worker_info HASH
-- KEYS[3]  worker_seen HASH
-- ARGV[1]  now in epoch ms, or '' for the server's clock
-- reply: one {worker id, JSON info, last_seen_ms} per unexpired row, by id (bytewise)

local now = clock_ms(ARGV[1])
local out = {}
for _, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], string.format('(%d', now), '+inf')) do
  local json = redis.call('HGET', KEYS[2], id)
  if json then
    out[#out + 1] = {id, json, redis.call('HGET', KEYS[3], id)}
  end
end
table.sort(out, function(a, b)
  return bytes_before(a[1], b[1])
end)
return out
