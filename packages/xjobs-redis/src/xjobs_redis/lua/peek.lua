-- peek: read-only; the best candidates a claim of this queue would take now, so a claim pass
-- whose total limit binds can pick the best across queues before it claims. It reads the pauses
-- as the claim does: a paused queue offers nothing, a job of a paused name is passed over.
-- KEYS[1]  ready ZSET of the queue
-- KEYS[2]  delayed ZSET of the queue
-- KEYS[3]  leased ZSET of the queue
-- KEYS[4]  the queue's pause flag (a STRING while the queue is paused)
-- KEYS[5]  the queue's SET of paused job names
-- ARGV[1]  now in epoch ms, or '' for the server's clock
-- ARGV[2]  how many candidates to answer
-- ARGV[3]  the most due delayed jobs, lapsed leases, and paused jobs to look at (as a claim would)
-- reply: up to ARGV[2] {score, job key} in claim order; score = priority * 2^42 + run_at_ms

local now = clock_ms(ARGV[1])
local ready, delayed, leased = KEYS[1], KEYS[2], KEYS[3]
local want = tonumber(ARGV[2])
local bound = tonumber(ARGV[3])
if want <= 0 or redis.call('EXISTS', KEYS[4]) == 1 then
  return {}
end
local held = nil
if redis.call('SCARD', KEYS[5]) > 0 then
  held = {}
  for _, name in ipairs(redis.call('SMEMBERS', KEYS[5])) do
    held[name] = true
  end
end
local function passed_over(job)
  return held ~= nil and held[jfield(job, 'name') or ''] == true
end

local candidates = {}
local head = redis.call('ZRANGE', ready, 0, want - 1 + (held and bound or 0), 'WITHSCORES')
local taken = 0
for i = 1, #head, 2 do
  if taken < want and not passed_over(head[i]) then
    candidates[#candidates + 1] = {tonumber(head[i + 1]), head[i]}
    taken = taken + 1
  end
end
local in_order = #candidates
for _, job in ipairs(redis.call('ZRANGEBYSCORE', delayed, '-inf', now, 'LIMIT', 0, bound)) do
  local f = jget(job, 'priority', 'run_at_ms')
  if f[1] and not passed_over(job) then
    candidates[#candidates + 1] = {ready_score(f[1], f[2]), job}
  end
end
for _, job in ipairs(redis.call('ZRANGEBYSCORE', leased, '-inf', now, 'LIMIT', 0, bound)) do
  local f = jget(job, 'state', 'attempt', 'max_attempts', 'priority', 'run_at_ms')
  if f[1] == 'running' and tonumber(f[2]) < tonumber(f[3]) and not passed_over(job) then
    candidates[#candidates + 1] = {ready_score(f[4], f[5]), job}
  end
end
if #candidates > in_order then
  -- the ready head is in claim order already; only promoted or rescued jobs need merging in
  table.sort(candidates, pair_before)
end
local out = {}
for i = 1, math.min(want, #candidates) do
  out[i] = candidates[i]
end
return out
