-- requeue: put each given finished job of one queue back to ready, due now, attempts reset
-- (claims never reset, so an old claim stays fenced out), filed in `created` (by creation),
-- unless it is missing, live, or a live job holds its namespace (an earlier job of the same call
-- included, so a batch never makes a duplicate). Its attempt errors are kept; its result is not.
-- KEYS[1]      ready ZSET of the queue
-- KEYS[2]      live HASH of the queue
-- KEYS[3]      created ZSET of the queue (live jobs by created_at_ms, as lib files them)
-- KEYS[4]      completed ZSET of the queue
-- KEYS[5]      failed ZSET of the queue
-- KEYS[6]      dead ZSET of the queue
-- KEYS[7]      cancelled ZSET of the queue
-- KEYS[7 + r]  job HASHes and their run's steps HASHes, alternately (job j at 6 + 2j, its
--              steps at 7 + 2j): a requeued job is live again, and the expiry its finish set on
--              both (retention) goes
-- ARGV[1]      now in epoch ms, or '' for the server's clock
-- ARGV[2]      '1' to answer each requeued job's fields, '0' for none (a bulk retry)
-- reply: one per job, in KEYS order: {'missing'} | {'live', state}
--        | {'duplicate', holder job id} | {'requeued', {field, value, ...}} (whole, or empty)

local now = clock_ms(ARGV[1])
local ready, live, created = KEYS[1], KEYS[2], KEYS[3]
local out = {}
for r = 8, #KEYS, 2 do
  local job, steps = KEYS[r], KEYS[r + 1]
  local state = jfield(job, 'state')
  if not state then
    out[#out + 1] = {'missing'}
  elseif is_live(state) then
    out[#out + 1] = {'live', state}
  else
    local namespace = namespace_of(job)
    local holder = redis.call('HGET', live, namespace)
    if holder then
      out[#out + 1] = {'duplicate', jfield(holder, 'id') or ''}
    else
      redis.call('HSET', job, 'state', 'ready', 'attempt', 0, 'run_at_ms', now,
        'updated_at_ms', now)
      redis.call('HDEL', job, 'claimed_by', 'lease_until_ms', 'finished_at_ms', 'last_error',
        'progress', 'result')
      for k = 4, 7 do
        redis.call('ZREM', KEYS[k], job)
      end
      redis.call('PERSIST', job)
      redis.call('PERSIST', steps)
      redis.call('ZADD', ready, ready_score(jfield(job, 'priority'), now), job)
      file_created(job, created)
      redis.call('HSET', live, namespace, job)
      out[#out + 1] = {'requeued', ARGV[2] == '1' and whole(job) or {}}
    end
  end
end
return out
