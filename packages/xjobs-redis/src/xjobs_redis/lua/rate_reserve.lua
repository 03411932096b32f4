-- rate_reserve: take `count` permits of every GCRA bucket at once, held ahead by one process that
-- starts each within `hold` ms, or none. The held permits are placed from now + hold on: each TAT
-- (`t` of the bucket's HASH) moves to max(TAT, now + hold) + count * interval, so a permit started
-- during its hold is one GCRA would have granted then. Refused, when a TAT would then be more than
-- its ceiling past now (half the burst left to per-run grants): nothing moves, not even a line.
-- KEYS[i]        bucket i's HASH (every rate key shares one hash tag: one slot)
-- ARGV[1]        now in epoch ms, or '' for the server's clock
-- ARGV[2]        count, the permits of each bucket
-- ARGV[3]        hold, in ms
-- ARGV[3 + i]    bucket i as JSON [interval, ceiling]: its emission interval in ms, and how far
--                past now its TAT may then be, in ms
-- reply: 1 when taken, 0 when refused

local now, server_time = clock_ms(ARGV[1])
local count, start = tonumber(ARGV[2]), now + tonumber(ARGV[3])

local tats, lines = {}, {}
for i, key in ipairs(KEYS) do
  local held = redis.call('HMGET', key, 't', 'l')
  local bucket = cjson.decode(ARGV[3 + i])
  local tat = math.max(tonumber(held[1] or '') or now, start) + count * bucket[1]
  if tat - now > bucket[2] then
    return 0
  end
  tats[i], lines[i] = tat, tonumber(held[2] or '') or 0
end
for i, key in ipairs(KEYS) do
  redis.call('HSET', key, 't', string.format('%.17g', tats[i]))
  if server_time then
    redis.call('PEXPIRE', key, math.ceil(math.max(tats[i], lines[i]) - now) + 1)
  end
end
return 1
