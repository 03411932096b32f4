-- promote: make each given ready job of one queue due now (a delayed or retrying one): its
-- run_at becomes min(run_at, now) and it moves from delayed into ready under its claim-order
-- score. A running or waiting job is live, a finished one finished; neither is touched. When a
-- job was promoted, the queue's name is published on the wake channel (as an enqueue's is).
-- KEYS[1]      ready ZSET of the queue
-- KEYS[2]      delayed ZSET of the queue
-- KEYS[2 + r]  the HASH of job r
-- ARGV[1]      now in epoch ms, or '' for the server's clock
-- ARGV[2]      '1' to answer each promoted job's fields, '0' for none (a bulk promote)
-- ARGV[3]      the wake channel
-- ARGV[4]      the queue's name
-- reply: one per job, in KEYS order: {'missing'} | {'finished', state} | {'live', state}
--        | {'promoted', moved, {field, value, ...}}: moved is 1 when run_at was in the future

local now = clock_ms(ARGV[1])
local ready, delayed = KEYS[1], KEYS[2]
local out, promoted = {}, false
for r = 3, #KEYS do
  local job = KEYS[r]
  local f = jget(job, 'state', 'run_at_ms')
  local state = f[1]
  if not state then
    out[#out + 1] = {'missing'}
  elseif not is_live(state) then
    out[#out + 1] = {'finished', state}
  elseif state ~= 'ready' then
    out[#out + 1] = {'live', state}
  else
    local run_at = tonumber(f[2])
    local moved = run_at > now and 1 or 0
    run_at = math.min(run_at, now)
    redis.call('HSET', job, 'run_at_ms', run_at, 'updated_at_ms', now)
    if redis.call('ZSCORE', delayed, job) then
      file_ready(job, ready, delayed, run_at)
    end
    out[#out + 1] = {'promoted', moved, ARGV[2] == '1' and whole(job) or {}}
    promoted = true
  end
end
if promoted then
  redis.call('PUBLISH', ARGV[3], ARGV[4])
end
return out
