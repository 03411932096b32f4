-- backfill_finish: settle a run completed or failed, with its error; a completed run becomes
-- the verdict of its declaration in its environment for its tenant, unless one already is.
-- KEYS[1]  backfill rows HASH (run id -> the row's JSON)
-- KEYS[2]  backfill verdicts HASH (the JSON of [name, checksum, environment, tenant] -> run id)
-- ARGV[1]  now in epoch ms, or '' for the server's clock
-- ARGV[2]  the run id
-- ARGV[3]  the status: completed or failed
-- ARGV[4]  the error as JSON (a string, or null)
-- reply: 1 when the row settled, 0 when the run has no row

local now = clock_ms(ARGV[1])
local existing = redis.call('HGET', KEYS[1], ARGV[2])
if not existing then
  return 0
end
local row = cjson.decode(existing)
row.status = ARGV[3]
row.error = cjson.decode(ARGV[4])
row.updated_at_ms = now
row.finished_at_ms = now
redis.call('HSET', KEYS[1], ARGV[2], cjson.encode(row))
if ARGV[3] == 'completed' then
  local verdict = cjson.encode({row.name, row.checksum, row.environment, row.tenant})
  redis.call('HSETNX', KEYS[2], verdict, ARGV[2])
end
return 1
