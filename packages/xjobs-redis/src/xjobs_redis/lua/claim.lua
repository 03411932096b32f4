-- claim: one queue's share of a claim pass. Due delayed jobs move to ready (at most ARGV[6]);
-- lapsed leases (at most ARGV[6]) on their final attempt (attempt >= max_attempts) are buried
-- (dead, or failed without dead_letter: the lapse recorded as the attempt's error, the ending
-- counted, the job out of the live index by creation, a watched one's id published to its
-- waiter, a child's ending recorded for its group), the others become candidates beside
-- ready; up to ARGV[2] candidates in claim order (priority, run_at, id) move to running under a
-- new claim. The pauses are read here: a paused queue takes nothing (it still promotes and
-- buries), and a job of a paused name is passed over where it stands (at most ARGV[6] of them
-- per call), keeping its place in the queue.
-- KEYS[1]   ready ZSET of the queue
-- KEYS[2]   delayed ZSET of the queue
-- KEYS[3]   leased ZSET of the queue
-- KEYS[4]   live HASH of the queue
-- KEYS[5]   dead ZSET of the queue
-- KEYS[6]   failed ZSET of the queue
-- KEYS[7]   created ZSET of the queue (live jobs by created_at_ms, as lib files them)
-- KEYS[8]   waiting ZSET of the queue (its waiting jobs by run_at_ms)
-- KEYS[9]   the queue's pause flag (a STRING while the queue is paused)
-- KEYS[10]  the queue's SET of paused job names
-- KEYS[11]  errors HASH of the queue (job id -> its attempt errors)
-- KEYS[12]  the queue's minute counters HASH
-- KEYS[13]  the queue's minute counters index ZSET
-- ARGV[1]   now in epoch ms, or '' for the server's clock
-- ARGV[2]   how many jobs to take (0: only promote and bury)
-- ARGV[3]   the claiming worker's id
-- ARGV[4]   the lease in ms
-- ARGV[5]   the last_error of a buried job
-- ARGV[6]   the most delayed jobs to promote, lapsed leases to sweep, and paused jobs to pass
--           over, in this call
-- reply: {claimed, buried}
--   claimed: one JSON array [id, run_id, name, queue, tenant_id, payload, priority, attempt,
--            max_attempts, dead_letter, claims, lease_until_ms, enqueued_by, traceparent,
--            created_at_ms, run_at_ms] per claimed job, in claim order, each value a string or
--            null for an absent field (one bulk string a job: the client parses one reply, not
--            sixteen)
--   buried:  one {id, run_id, name, queue, tenant_id, payload, state, attempt} per buried job

local now = clock_ms(ARGV[1])
local ready, delayed, leased, live = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local want = tonumber(ARGV[2])
local worker_id = ARGV[3]
local lease_until = now + tonumber(ARGV[4])
local bound = tonumber(ARGV[6])

if redis.call('EXISTS', KEYS[9]) == 1 then
  want = 0
end
local held = nil -- the paused job names, when there are any
if want > 0 and redis.call('SCARD', KEYS[10]) > 0 then
  held = {}
  for _, name in ipairs(redis.call('SMEMBERS', KEYS[10])) do
    held[name] = true
  end
end

for _, job in ipairs(redis.call('ZRANGEBYSCORE', delayed, '-inf', now, 'LIMIT', 0, bound)) do
  local f = jget(job, 'priority', 'run_at_ms')
  if f[1] then
    redis.call('ZADD', ready, ready_score(f[1], f[2]), job)
  end
  redis.call('ZREM', delayed, job)
end

local buried = {}
local rescued = {}
for _, job in ipairs(redis.call('ZRANGEBYSCORE', leased, '-inf', now, 'LIMIT', 0, bound)) do
  local f = jget(job, 'state', 'attempt', 'max_attempts', 'dead_letter',
    'priority', 'run_at_ms', 'name', 'claimed_by', 'id')
  if f[1] ~= 'running' then
    redis.call('ZREM', leased, job)
  elseif tonumber(f[2]) >= tonumber(f[3]) then
    local state = f[4] == '1' and 'dead' or 'failed'
    redis.call('HSET', job, 'state', state, 'finished_at_ms', now, 'last_error', ARGV[5],
      'updated_at_ms', now)
    redis.call('HDEL', job, 'lease_until_ms')
    redis.call('ZREM', leased, job)
    redis.call('ZREM', KEYS[7], job)
    release_namespace(job, live)
    file_finished(job, state == 'dead' and KEYS[5] or KEYS[6])
    record_error(KEYS[11], f[9], f[2], f[8], now, ARGV[5])
    count_ending(KEYS[12], KEYS[13], f[7], state == 'dead' and 'dead-lettered' or 'dropped', now)
    notify_settled(job)
    record_ending(job, state)
    buried[#buried + 1] = jget(job, 'id', 'run_id', 'name', 'queue', 'tenant_id',
      'payload', 'state', 'attempt')
  elseif not (held and held[f[7]]) then
    rescued[#rescued + 1] = {ready_score(f[5], f[6]), job}
  end
end

-- the state, then the reply's columns of each claimed job
local CLAIMED = jplan('state', 'id', 'run_id', 'name', 'queue', 'tenant_id', 'payload',
  'priority', 'attempt', 'max_attempts', 'dead_letter', 'claims', 'lease_until_ms',
  'enqueued_by', 'traceparent', 'created_at_ms', 'run_at_ms')
local claimed = {}
if want > 0 then
  local candidates = {}
  local head = redis.call('ZRANGE', ready, 0, want - 1 + (held and bound or 0), 'WITHSCORES')
  for i = 1, #head, 2 do
    candidates[#candidates + 1] = {tonumber(head[i + 1]), head[i]}
  end
  for _, pair in ipairs(rescued) do
    candidates[#candidates + 1] = pair
  end
  if #rescued > 0 then
    -- ZRANGE gave the ready head in claim order already; only rescued leases need merging in
    table.sort(candidates, pair_before)
  end
  for _, pair in ipairs(candidates) do
    if #claimed >= want then
      break
    end
    local job = pair[2]
    -- the state, then the reply's columns, read once: the claim's own writes patched in below
    local columns = jread(job, CLAIMED)
    local state = table.remove(columns, 1)
    if not (held and held[columns[3]] and is_live(state)) then
      redis.call('ZREM', ready, job)
      if is_live(state) then
        if state == 'waiting' then
          redis.call('ZREM', KEYS[8], job)
        end
        local attempt, claims = tonumber(columns[8]) + 1, tonumber(columns[11]) + 1
        redis.call('HSET', job, 'state', 'running', 'claimed_by', worker_id, 'attempt', attempt,
          'claims', claims, 'lease_until_ms', lease_until, 'updated_at_ms', now)
        redis.call('ZADD', leased, lease_until, job)
        columns[8], columns[11], columns[12] = tostring(attempt), tostring(claims),
          tostring(lease_until)
        for i = 1, #columns do
          if not columns[i] then
            columns[i] = cjson.null
          end
        end
        claimed[#claimed + 1] = cjson.encode(columns)
      end
    end
  end
end
return {claimed, buried}
