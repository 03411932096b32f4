-- counters_read: read-only; one queue's counters of one tier whose bucket starts at or after
-- ARGV[1] (the index gives their fields, so older buckets are never read).
-- KEYS[1]  the tier's counters HASH of the queue (`bucket_ms|outcome|name` -> count)
-- KEYS[2]  the tier's counters index ZSET of the queue (field by bucket_ms)
-- ARGV[1]  since_ms
-- reply: {field, count, ...} (flat)

local fields = redis.call('ZRANGEBYSCORE', KEYS[2], ARGV[1], '+inf')
local out = {}
for i = 1, #fields, 500 do
  local chunk = {unpack(fields, i, math.min(i + 499, #fields))}
  local counts = redis.call('HMGET', KEYS[1], unpack(chunk))
  for j = 1, #chunk do
    if counts[j] then
      out[#out + 1] = chunk[j]
      out[#out + 1] = counts[j]
    end
  end
end
return out
