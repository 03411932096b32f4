-- rate_spent: how far ahead of now one bucket's TAT is, in ms (0 for an idle bucket).
-- KEYS[1]  the bucket's HASH
-- ARGV[1]  now in epoch ms, or '' for the server's clock
-- reply: the ms as a string (a fraction is kept)

local now = clock_ms(ARGV[1])
local tat = tonumber(redis.call('HGET', KEYS[1], 't') or '') or now
return string.format('%.17g', math.max(tat - now, 0))
