-- remove: delete each given finished job of one queue with its steps and its attempt errors;
-- a live job is left as it is (cancel it first). The job leaves every index of its queue.
-- KEYS[1]      live HASH of the queue
-- KEYS[2]      created ZSET of the queue (live jobs by created_at_ms, as lib files them)
-- KEYS[3]      errors HASH of the queue (job id -> its attempt errors)
-- KEYS[4]      completed ZSET of the queue
-- KEYS[5]      failed ZSET of the queue
-- KEYS[6]      dead ZSET of the queue
-- KEYS[7]      cancelled ZSET of the queue
-- KEYS[7 + r]  job HASHes and their run's steps HASHes, alternately (job j at 6 + 2j, its
--              steps at 7 + 2j)
-- ARGV[1]      '1' to answer each removed job's fields, '0' for none (a bulk remove)
-- reply: one per job, in KEYS order: {'missing'} | {'live', state}
--        | {'removed', {field, value, ...}} (the job as it was, or empty)

local live, created, errors = KEYS[1], KEYS[2], KEYS[3]
local out = {}
for r = 8, #KEYS, 2 do
  local job, steps = KEYS[r], KEYS[r + 1]
  local f = jget(job, 'state', 'id')
  local state = f[1]
  if not state then
    out[#out + 1] = {'missing'}
  elseif is_live(state) then
    out[#out + 1] = {'live', state}
  else
    local fields = ARGV[1] == '1' and whole(job) or {}
    release_namespace(job, live)
    redis.call('ZREM', created, job)
    for k = 4, 7 do
      redis.call('ZREM', KEYS[k], job)
    end
    redis.call('HDEL', errors, f[2])
    redis.call('DEL', steps)
    redis.call('DEL', job)
    out[#out + 1] = {'removed', fields}
  end
end
return out
