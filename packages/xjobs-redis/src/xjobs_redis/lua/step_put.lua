-- step_put: record one step of a run, fenced on state running AND the claim (as ack and nack
-- are); a `done` record is never overwritten (a memoized result stays), others are replaced.
-- KEYS[1]  the job HASH
-- KEYS[2]  the run's steps HASH (step name -> the record's JSON), on the job's queue slot
-- ARGV[1]  the claim's worker id
-- ARGV[2]  the claim's claims counter
-- ARGV[3]  the step name
-- ARGV[4]  the record's JSON {status, result, error, position, created_at_ms}
-- reply: 1 when the record was written, 0 when the fence missed or the step is done

if not holds_claim(KEYS[1], ARGV[1], ARGV[2]) then
  return 0
end
local existing = redis.call('HGET', KEYS[2], ARGV[3])
if existing and cjson.decode(existing).status == 'done' then
  return 0
end
redis.call('HSET', KEYS[2], ARGV[3], ARGV[4])
return 1
