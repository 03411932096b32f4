-- backfill_begin: a run of a sweep starts (or starts again, on a retry): a new row is running at
-- zero; a row that exists keeps its cursor, count and batches and loses its error and finish.
-- KEYS[1]  backfill rows HASH (run id -> the row's JSON), the ledger's slot
-- ARGV[1]  now in epoch ms, or '' for the server's clock
-- ARGV[2]  the run id
-- ARGV[3]  the new row's JSON {run_id, job_id, name, checksum, environment, tenant}
-- reply: 1 when the row is new, 0 when an existing row began again

local now = clock_ms(ARGV[1])
local existing = redis.call('HGET', KEYS[1], ARGV[2])
local row
if existing then
  row = cjson.decode(existing)
  row.status = 'running'
  row.error = cjson.null
  row.finished_at_ms = cjson.null
  row.updated_at_ms = now
  redis.call('HSET', KEYS[1], ARGV[2], cjson.encode(row))
  return 0
end
row = cjson.decode(ARGV[3])
row.status = 'running'
row.cursor = cjson.null
row.count = 0
row.batches = 0
row.error = cjson.null
row.started_at_ms = now
row.updated_at_ms = now
row.finished_at_ms = cjson.null
redis.call('HSET', KEYS[1], ARGV[2], cjson.encode(row))
return 1
