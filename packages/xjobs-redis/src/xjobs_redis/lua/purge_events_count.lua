-- purge_events_count: read-only; the dry run of event_purge: how many events were sent before
-- ARGV[1] (the waits whose deadline fell are counted queue by queue, beside it).
-- KEYS[1]  the SET of every name's sent ZSET that holds events
-- ARGV[1]  the cut-off in epoch ms
-- reply: the count

local before = '(' .. ms_text(tonumber(ARGV[1]))
local count = 0
for _, sent in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  count = count + redis.call('ZCOUNT', sent, '-inf', before)
end
return count
