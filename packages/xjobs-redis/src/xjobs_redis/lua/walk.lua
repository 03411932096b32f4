-- walk: read-only; one index of one queue walked in (created_at_ms, job key) order, newest or
-- oldest first, strictly past a position, answering the jobs that match a filter. A call
-- examines at most ARGV[7] index entries and answers at most ARGV[6] matches, with the last entry
-- it examined, so the caller resumes there (xjobs_redis.walk merges the indexes and queues).
-- A created-ordered index is entered by rank (a bisection among the position's ties), so the
-- cost of a call does not grow with the index; the leased ZSET (ordered by lease) is read whole,
-- up to ARGV[7] entries, and ordered here.
-- KEYS[1]  the index: a ZSET of job keys by created_at_ms (created, or a finished state's), the
--          ready ZSET (its priority-0 band, where a job enqueued due now scores its created_at:
--          the `enqueued` filter keeps those), or the leased ZSET (ARGV[5] = '0')
-- KEYS[2]  live HASH of the queue (the `free` filter reads it)
-- ARGV[1]  'newest' (descending) or 'oldest' (ascending)
-- ARGV[2]  the position's created_at_ms, or '' to start at the walk's first entry
-- ARGV[3]  the position's job key (only jobs strictly past the position are answered)
-- ARGV[4]  the filter as JSON: states (a list, empty for any), name, tenant, after and before
--          (created_at_ms bounds, both exclusive), run_after (run_at_ms strictly after it), free
--          (true: only jobs whose namespace no live job holds), enqueued (true: only ready jobs
--          whose run_at is their created_at); null does not filter
-- ARGV[5]  '1' when KEYS[1] is ordered by created_at_ms, '0' when it is not
-- ARGV[6]  the most matches to answer
-- ARGV[7]  the most index entries to examine
-- ARGV[8..]  the job fields to answer per match
-- reply: {matches, last_score, last_member, exhausted, examined}: matches holds one list of the
--        ARGV[8..] fields per matching job, in walk order; last_score and last_member name the
--        last entry examined ('' when none); exhausted is 1 when nothing is left past it

local index, live = KEYS[1], KEYS[2]
local newest = ARGV[1] == 'newest'
local pos_score = ARGV[2] ~= '' and tonumber(ARGV[2]) or nil
local pos_member = ARGV[3]
local filter = cjson.decode(ARGV[4])
local ordered = ARGV[5] == '1'
local want, budget = tonumber(ARGV[6]), tonumber(ARGV[7])
local fields = {}
for i = 8, #ARGV do
  fields[#fields + 1] = ARGV[i]
end
local PAGE = 200

local function opt(value)
  if value == nil or value == cjson.null then
    return nil
  end
  return value
end
local states = nil
if opt(filter.states) and #filter.states > 0 then
  states = {}
  for _, state in ipairs(filter.states) do
    states[state] = true
  end
end
local name, tenant = opt(filter.name), opt(filter.tenant)
local after, before, run_after = opt(filter.after), opt(filter.before), opt(filter.run_after)
local free = filter.free == true
local enqueued = filter.enqueued == true

local function matches(job)
  local f = jget(job, 'state', 'name', 'tenant_id', 'run_at_ms', 'idempotency_key',
    'created_at_ms')
  if not f[1] or (states and not states[f[1]]) then
    return false
  end
  if enqueued and (f[1] ~= 'ready' or tonumber(f[4]) ~= tonumber(f[6])) then
    return false
  end
  if (name and f[2] ~= name) or (tenant and f[3] ~= tenant) then
    return false
  end
  if run_after and not (tonumber(f[4]) > run_after) then
    return false
  end
  if free then
    local namespace = f[2] .. '\0' .. (f[3] or '') .. '\0' .. f[5]
    if redis.call('HEXISTS', live, namespace) == 1 then
      return false
    end
  end
  return true
end

local function past(score, member)
  if not pos_score then
    return true
  end
  if newest then
    return score < pos_score or (score == pos_score and bytes_before(member, pos_member))
  end
  return score > pos_score or (score == pos_score and bytes_before(pos_member, member))
end

local rows, examined, exhausted = {}, 0, 0
local last_score, last_member = '', ''

if not ordered then
  local found = {}
  local all = redis.call('ZRANGE', index, 0, budget - 1)
  examined = #all
  for _, job in ipairs(all) do
    local created = tonumber(jfield(job, 'created_at_ms'))
    if created and (not after or created > after) and (not before or created < before)
      and past(created, job) and matches(job) then
      found[#found + 1] = {created, job}
    end
  end
  table.sort(found, function(a, b)
    if newest then
      return pair_before(b, a)
    end
    return pair_before(a, b)
  end)
  for i = 1, math.min(want, #found) do
    local job = found[i][2]
    rows[i] = jget(job, unpack(fields))
    last_score, last_member = ms_text(found[i][1]), job
  end
  exhausted = #found <= want and 1 or 0
  return {rows, last_score, last_member, exhausted, examined}
end

-- The rank of the walk's first entry: past the position (a bisection among its ties, whose
-- members a ZSET orders bytewise) and inside the created_at bounds.
local start = 0
if pos_score then
  local ties = redis.call('ZCOUNT', index, ARGV[2], ARGV[2])
  local lo
  if newest then
    lo = redis.call('ZCOUNT', index, '(' .. ARGV[2], '+inf')
  else
    lo = redis.call('ZCOUNT', index, '-inf', '(' .. ARGV[2])
  end
  local hi = lo + ties
  while lo < hi do
    local mid = math.floor((lo + hi) / 2)
    local member
    if newest then
      member = redis.call('ZREVRANGE', index, mid, mid)[1]
    else
      member = redis.call('ZRANGE', index, mid, mid)[1]
    end
    if past(pos_score, member) then
      hi = mid
    else
      lo = mid + 1
    end
  end
  start = lo
end
if newest and before then
  start = math.max(start, redis.call('ZCOUNT', index, ms_text(before), '+inf'))
elseif not newest and after then
  start = math.max(start, redis.call('ZCOUNT', index, '-inf', ms_text(after)))
end

local rank, done = start, false
while not done and #rows < want and examined < budget do
  local n = math.min(budget - examined, PAGE)
  local page
  if newest then
    page = redis.call('ZREVRANGE', index, rank, rank + n - 1, 'WITHSCORES')
  else
    page = redis.call('ZRANGE', index, rank, rank + n - 1, 'WITHSCORES')
  end
  for i = 1, #page, 2 do
    local job, score = page[i], tonumber(page[i + 1])
    if (newest and after and score <= after) or (not newest and before and score >= before) then
      exhausted, done = 1, true
      break
    end
    examined = examined + 1
    last_score, last_member = page[i + 1], job
    if matches(job) then
      rows[#rows + 1] = jget(job, unpack(fields))
      if #rows >= want then
        done = true
        break
      end
    end
  end
  if not done then
    if #page / 2 < n then
      exhausted, done = 1, true
    end
    rank = rank + #page / 2
  end
end
return {rows, last_score, last_member, exhausted, examined}
