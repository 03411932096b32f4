-- requeue_many: one queue's share of a bulk requeue. Eligible jobs are in the given finished
-- states (and of the given job name), one per namespace (the oldest by created_at, then id),
-- none whose namespace a live job holds; the oldest ARGV[2] of them are requeued as requeue
-- does, and the rest are counted.
-- KEYS[1]  ready ZSET of the queue
-- KEYS[2]  live HASH of the queue
-- KEYS[3..]  the finished-state ZSETs to move from (completed, failed, dead, cancelled)
-- ARGV[1]  now in epoch ms, or '' for the server's clock
-- ARGV[2]  the most jobs to move (0: only count)
-- ARGV[3]  '1' when only one job name moves, else '0'
-- ARGV[4]  that job name
-- reply: {moved, remaining}; remaining is what a second call would move from this queue

local now = clock_ms(ARGV[1])
local ready, live = KEYS[1], KEYS[2]
local limit = tonumber(ARGV[2])
local only_name = ARGV[3] == '1' and ARGV[4] or nil

local rows = {}
for k = 3, #KEYS do
  local flat = redis.call('ZRANGE', KEYS[k], 0, -1, 'WITHSCORES')
  for i = 1, #flat, 2 do
    rows[#rows + 1] = {tonumber(flat[i + 1]), flat[i], KEYS[k]}
  end
end
table.sort(rows, pair_before)

local taken = {}
local picked = {}
local eligible = 0
for _, row in ipairs(rows) do
  local job = row[2]
  local name = redis.call('HGET', job, 'name')
  if name and (only_name == nil or name == only_name) then
    local namespace = namespace_of(job)
    if not taken[namespace] and redis.call('HEXISTS', live, namespace) == 0 then
      taken[namespace] = true
      eligible = eligible + 1
      if #picked < limit then
        picked[#picked + 1] = {job, row[3], namespace}
      end
    end
  end
end

for _, pick in ipairs(picked) do
  local job = pick[1]
  redis.call('HSET', job, 'state', 'ready', 'attempt', 0, 'run_at_ms', now, 'updated_at_ms', now)
  redis.call('HDEL', job, 'claimed_by', 'lease_until_ms', 'finished_at_ms', 'last_error',
    'progress')
  redis.call('ZREM', pick[2], job)
  redis.call('ZADD', ready, ready_score(redis.call('HGET', job, 'priority'), now), job)
  redis.call('HSET', live, pick[3], job)
end
return {#picked, eligible - #picked}
