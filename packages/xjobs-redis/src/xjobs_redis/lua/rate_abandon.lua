-- rate_abandon: hand back the permit a grant of these buckets took, for a run that never
-- started. Each TAT (`t` of the bucket's HASH) moves back one interval, never before now.
-- KEYS[i]      bucket i's HASH (every rate key shares one hash tag: one slot)
-- ARGV[1]      now in epoch ms, or '' for the server's clock
-- ARGV[i+1]    bucket i's emission interval in ms
-- reply: how many buckets held a TAT to move back

local now = clock_ms(ARGV[1])
local moved = 0
for i, key in ipairs(KEYS) do
  local held = tonumber(redis.call('HGET', key, 't') or '')
  if held then
    moved = moved + 1
    redis.call('HSET', key, 't', string.format('%.17g', math.max(held - tonumber(ARGV[i + 1]), now)))
  end
end
return moved
