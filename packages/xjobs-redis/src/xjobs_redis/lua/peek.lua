-- peek: read-only; the best candidates a claim of this queue would take now, so a claim pass
-- whose total limit binds can pick the best across queues before it claims.
-- KEYS[1]  ready ZSET of the queue
-- KEYS[2]  delayed ZSET of the queue
-- KEYS[3]  leased ZSET of the queue
-- ARGV[1]  now in epoch ms, or '' for the server's clock
-- ARGV[2]  how many candidates to answer
-- ARGV[3]  the most due delayed jobs, and lapsed leases, to look at (as a claim would)
-- reply: up to ARGV[2] {score, job key} in claim order; score = priority * 2^42 + run_at_ms

local now = clock_ms(ARGV[1])
local ready, delayed, leased = KEYS[1], KEYS[2], KEYS[3]
local want = tonumber(ARGV[2])
local bound = tonumber(ARGV[3])
if want <= 0 then
  return {}
end

local candidates = {}
local head = redis.call('ZRANGE', ready, 0, want - 1, 'WITHSCORES')
for i = 1, #head, 2 do
  candidates[#candidates + 1] = {tonumber(head[i + 1]), head[i]}
end
for _, job in ipairs(redis.call('ZRANGEBYSCORE', delayed, '-inf', now, 'LIMIT', 0, bound)) do
  local f = redis.call('HMGET', job, 'priority', 'run_at_ms')
  if f[1] then
    candidates[#candidates + 1] = {ready_score(f[1], f[2]), job}
  end
end
for _, job in ipairs(redis.call('ZRANGEBYSCORE', leased, '-inf', now, 'LIMIT', 0, bound)) do
  local f = redis.call('HMGET', job, 'state', 'attempt', 'max_attempts', 'priority', 'run_at_ms')
  if f[1] == 'running' and tonumber(f[2]) < tonumber(f[3]) then
    candidates[#candidates + 1] = {ready_score(f[4], f[5]), job}
  end
end
if #candidates > #head / 2 then
  -- the ready head is in claim order already; only promoted or rescued jobs need merging in
  table.sort(candidates, pair_before)
end
local out = {}
for i = 1, math.min(want, #candidates) do
  out[i] = candidates[i]
end
return out
