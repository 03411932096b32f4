-- lib: the helpers every script shares; xjobs_redis.scripts prepends this file to each script
-- before SCRIPT LOAD, so it never runs on its own.
-- KEYS: none (each helper takes the keys its caller was passed, or a job key read from an index)
-- ARGV: none
-- reply: none
--
-- Index members (ready, delayed, leased, the finished-state ZSETs) and the live HASH's values
-- are job keys that xjobs_redis.keys built and an enqueue passed in KEYS: a script that finds a
-- job in an index uses that name as it is and never builds one. Every job key of a queue shares
-- the queue's hash tag, so all of it is one slot.

if redis.replicate_commands then
  redis.replicate_commands() -- effects replication, so TIME may precede writes on Redis 6.2
end

local PRIORITY_SPAN = 4398046511104 -- 2^42: run_at_ms stays below it until the year 2109

-- The script's now in epoch ms, and whether it came from the server's clock ('' asks for it).
local function clock_ms(arg)
  if arg ~= nil and arg ~= '' then
    return tonumber(arg), false
  end
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000), true
end

-- The ready ZSET's score: claim order is priority, then run_at (then the member, bytewise).
-- run_at is held inside the span, so a run_at before 1970 or after 2109 cannot cross into
-- another priority; xjobs_redis.rows keeps the priority small enough for an exact double.
local function ready_score(priority, run_at_ms)
  local run_at = math.min(math.max(tonumber(run_at_ms), 0), PRIORITY_SPAN - 1)
  return tonumber(priority) * PRIORITY_SPAN + run_at
end

-- Bytewise string order, as a ZSET orders members of one score (Lua's < follows the locale).
local function bytes_before(a, b)
  local n = math.min(#a, #b)
  for i = 1, n do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then
      return x < y
    end
  end
  return #a < #b
end

-- Order {score, member} pairs as the ready ZSET would.
local function pair_before(a, b)
  if a[1] ~= b[1] then
    return a[1] < b[1]
  end
  return bytes_before(a[2], b[2])
end

-- The idempotency namespace of a stored job: name NUL coalesce(tenant_id, '') NUL key.
local function namespace_of(job)
  local f = redis.call('HMGET', job, 'name', 'tenant_id', 'idempotency_key')
  return f[1] .. '\0' .. (f[2] or '') .. '\0' .. f[3]
end

-- Release the job's namespace if it holds it (a finished job no longer dedupes).
local function release_namespace(job, live)
  local namespace = namespace_of(job)
  if redis.call('HGET', live, namespace) == job then
    redis.call('HDEL', live, namespace)
  end
end

-- The fence of every settle: state running AND the claim (claimed_by, claims).
local function holds_claim(job, worker_id, claims)
  local f = redis.call('HMGET', job, 'state', 'claimed_by', 'claims')
  return f[1] == 'running' and f[2] == worker_id and f[3] == claims
end

-- File a finished job in its state's ZSET (score created_at_ms), for bulk requeue and retention.
local function file_finished(job, state_zset)
  redis.call('ZADD', state_zset, redis.call('HGET', job, 'created_at_ms'), job)
end

-- Every field of a job hash, flat (field, value, ...), as HGETALL answers.
local function whole(job)
  return redis.call('HGETALL', job)
end

-- Under the server's clock a lease key expires with its last slot, so a key no run comes back
-- to leaves nothing behind. Under an injected clock Redis' own expiry would disagree with the
-- clock's slot times, so none is set (the slots still expire by their scores).
local function expire_with_last_slot(slots, now, server_time)
  if server_time then
    local last = redis.call('ZRANGE', slots, -1, -1, 'WITHSCORES')
    if last[2] then
      redis.call('PEXPIRE', slots, math.max(tonumber(last[2]) - now, 1))
    end
  end
end
