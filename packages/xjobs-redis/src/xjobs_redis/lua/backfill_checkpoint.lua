-- backfill_checkpoint: the position after a batch that ran, as absolute values (a repeated
-- write counts nothing twice); only a running row moves.
-- KEYS[1]  backfill rows HASH (run id -> the row's JSON)
-- ARGV[1]  now in epoch ms, or '' for the server's clock
-- ARGV[2]  the run id
-- ARGV[3]  the cursor field as JSON (a JSON text as a string, or null)
-- ARGV[4]  the count swept so far
-- ARGV[5]  the batches recorded so far
-- reply: 1 when the row moved, 0 when there is no running row

local now = clock_ms(ARGV[1])
local existing = redis.call('HGET', KEYS[1], ARGV[2])
if not existing then
  return 0
end
local row = cjson.decode(existing)
if row.status ~= 'running' then
  return 0
end
row.cursor = cjson.decode(ARGV[3])
row.count = tonumber(ARGV[4])
row.batches = tonumber(ARGV[5])
row.updated_at_ms = now
redis.call('HSET', KEYS[1], ARGV[2], cjson.encode(row))
return 1
