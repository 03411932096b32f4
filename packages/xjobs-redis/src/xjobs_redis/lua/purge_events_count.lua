-- purge_events_count: read-only; the dry run of event_purge: how many events were sent, and how
-- many waits' deadlines fell, before ARGV[1].
-- KEYS[1]  the SET of every name's sent ZSET that holds events
-- KEYS[2]  the wait deadlines ZSET (job id by deadline_ms)
-- ARGV[1]  the cut-off in epoch ms
-- reply: the count

local before = '(' .. ms_text(tonumber(ARGV[1]))
local count = redis.call('ZCOUNT', KEYS[2], '-inf', before)
for _, sent in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  count = count + redis.call('ZCOUNT', sent, '-inf', before)
end
return count
