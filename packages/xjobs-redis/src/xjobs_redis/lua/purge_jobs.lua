-- purge_jobs: one batch of the retention purge of one queue's finished jobs in one state, each
-- checked again here (the caller read them first): a job whose HASH is gone (its expiry passed)
-- leaves the state's index and the errors HASH; a job still in the state that finished before its
-- cut-off (its name's, else the state's) goes with its run's steps, its attempt errors and its
-- index entry. A job requeued (or finished again) since the read is left alone. Counters are not
-- touched: they count endings, not jobs.
-- KEYS[1]      the finished ZSET of the state
-- KEYS[2]      errors HASH of the queue (job id -> its attempt errors)
-- KEYS[2 + r]  job HASHes and their run's steps HASHes, alternately (job j at 1 + 2j, its steps
--              at 2 + 2j; the job HASH again when its run is unknown)
-- ARGV[1]      the state
-- ARGV[2]      the state's cut-off: a job finished before it goes
-- ARGV[3]      JSON {job name: cut-off} of the names with a keep of their own ('{}' for none)
-- ARGV[4]      JSON array of the jobs' ids, in KEYS order
-- reply: how many jobs went

local index, errors, state = KEYS[1], KEYS[2], ARGV[1]
local cut = tonumber(ARGV[2])
local names = cjson.decode(ARGV[3])
local ids = cjson.decode(ARGV[4])
local purged = 0
for r = 3, #KEYS, 2 do
  local job, steps = KEYS[r], KEYS[r + 1]
  local f = jget(job, 'state', 'name', 'finished_at_ms')
  local gone = not f[1]
  if f[1] == state then
    gone = tonumber(f[3] or '0') < (names[f[2]] or cut)
    if gone then
      redis.call('DEL', job, steps)
    end
  end
  if gone then
    redis.call('ZREM', index, job)
    redis.call('HDEL', errors, ids[(r - 1) / 2])
    purged = purged + 1
  end
end
return purged
