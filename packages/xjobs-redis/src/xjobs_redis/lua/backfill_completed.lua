-- backfill_completed: read-only; the verdict, the earliest completed run of a declaration in an
-- environment for a tenant (null: a cross-tenant sweep).
-- KEYS[1]  backfill rows HASH (run id -> the row's JSON)
-- KEYS[2]  backfill verdicts HASH (the JSON of [name, checksum, environment, tenant] -> run id)
-- ARGV[1]  the JSON of {name, checksum, environment, tenant}
-- reply: the completed row's JSON, or false when none completed

local asked = cjson.decode(ARGV[1])
local verdict = cjson.encode({asked.name, asked.checksum, asked.environment, asked.tenant})
local run_id = redis.call('HGET', KEYS[2], verdict)
if not run_id then
  return false
end
return redis.call('HGET', KEYS[1], run_id)
