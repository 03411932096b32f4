-- counters_rollup: one queue's fold of its closed minute buckets into hour and day, at most once
-- a bucket, and the trim of every tier past its retention (lib's MINUTE_, HOUR_ and
-- DAY_RETENTION_MS). The folded record is a watermark: every minute bucket before it was folded;
-- a fold takes the buckets from it to the current minute (open, so not folded) and moves it
-- there. The trim runs first, so a bucket the watermark lost (it expires a day after the minute
-- tier's retention without a rollup) is gone before it could be folded again.
-- KEYS[1]  the minute counters HASH of the queue
-- KEYS[2]  the minute counters index ZSET of the queue
-- KEYS[3]  the hour counters HASH of the queue
-- KEYS[4]  the hour counters index ZSET of the queue
-- KEYS[5]  the day counters HASH of the queue
-- KEYS[6]  the day counters index ZSET of the queue
-- KEYS[7]  the queue's folded watermark STRING (minute buckets before it are folded)
-- ARGV[1]  now in epoch ms (the rollup's reading)
-- reply: the minute buckets folded, ascending (as text)

local now = tonumber(ARGV[1])

local function trim(counter, index, cutoff)
  local before = '(' .. ms_text(cutoff)
  local old = redis.call('ZRANGEBYSCORE', index, '-inf', before)
  for i = 1, #old, 500 do
    redis.call('HDEL', counter, unpack(old, i, math.min(i + 499, #old)))
  end
  redis.call('ZREMRANGEBYSCORE', index, '-inf', before)
end
trim(KEYS[1], KEYS[2], now - MINUTE_RETENTION_MS)
trim(KEYS[3], KEYS[4], now - HOUR_RETENTION_MS)
trim(KEYS[5], KEYS[6], now - DAY_RETENTION_MS)

local current = bucket_of(now, MINUTE_MS)
local from = redis.call('GET', KEYS[7])
local fields = redis.call('ZRANGEBYSCORE', KEYS[2], from or '-inf', '(' .. ms_text(current),
  'WITHSCORES')
local folded, seen = {}, {}
for i = 1, #fields, 2 do
  local field, bucket = fields[i], tonumber(fields[i + 1])
  local count = tonumber(redis.call('HGET', KEYS[1], field))
  if count and count > 0 then
    local rest = string.sub(field, string.find(field, '|', 1, true) + 1)
    local hour, day = bucket_of(bucket, HOUR_MS), bucket_of(bucket, DAY_MS)
    add_count(KEYS[3], KEYS[4], hour, ms_text(hour) .. '|' .. rest, count, HOUR_RETENTION_MS,
      HOUR_MS, now)
    add_count(KEYS[5], KEYS[6], day, ms_text(day) .. '|' .. rest, count, DAY_RETENTION_MS, DAY_MS,
      now)
    if not seen[bucket] then
      seen[bucket] = true
      folded[#folded + 1] = ms_text(bucket)
    end
  end
end
if not from or tonumber(from) < current then
  redis.call('SET', KEYS[7], ms_text(current), 'PX', MINUTE_RETENTION_MS + DAY_MS)
else
  redis.call('PEXPIRE', KEYS[7], MINUTE_RETENTION_MS + DAY_MS)
end
return folded
