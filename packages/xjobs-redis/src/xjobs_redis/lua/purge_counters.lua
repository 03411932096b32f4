-- purge_counters: one batch of the retention purge of one queue's counters in one tier: the
-- buckets that start before the tier's cut-off, oldest first, and for the minute tier only those
-- before the folded watermark (their hour and day hold what they counted).
-- KEYS[1]  the tier's counters HASH of the queue
-- KEYS[2]  the tier's counters index ZSET (field by bucket_ms)
-- KEYS[3]  the queue's folded watermark STRING (minute buckets before it are folded)
-- ARGV[1]  the tier: minute, hour or day
-- ARGV[2]  the cut-off: a bucket starting before it goes
-- ARGV[3]  the most fields to delete
-- ARGV[4]  '1' for the dry run (count, delete nothing), else '0'
-- reply: how many fields went (or would go)

local cut = tonumber(ARGV[2])
if ARGV[1] == 'minute' then
  cut = math.min(cut, tonumber(redis.call('GET', KEYS[3]) or '0'))
end
local before = '(' .. ms_text(cut)
if ARGV[4] == '1' then
  return redis.call('ZCOUNT', KEYS[2], '-inf', before)
end
local fields = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', before, 'LIMIT', 0, tonumber(ARGV[3]))
if #fields > 0 then
  redis.call('HDEL', KEYS[1], unpack(fields))
  redis.call('ZREM', KEYS[2], unpack(fields))
end
return #fields
