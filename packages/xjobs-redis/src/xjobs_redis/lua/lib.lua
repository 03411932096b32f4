-- lib: the helpers every script shares; xjobs_redis.scripts prepends this file to each script
-- before SCRIPT LOAD, so it never runs on its own.
-- KEYS: none (each helper takes the keys its caller was passed, or a key read from an index)
-- ARGV: none
-- reply: none
--
-- Index members (ready, delayed, leased, the finished-state ZSETs) and the live HASH's values
-- are job keys that xjobs_redis.keys built and an enqueue passed in KEYS: a script that finds a
-- job in an index uses that name as it is and never builds one. Every job key of a queue shares
-- the queue's hash tag, so all of it is one slot. An event wait's entry likewise holds the keys
-- a park was passed (its job's, its event's index), and the SET of event names holds the keys of
-- their sent ZSETs.

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

-- The compact job HASH: a column at its default is not stored (absent = default). `id` and
-- `queue` are in the job's key (`P:{P:q}:job:<id>`), `run_at_ms` and `updated_at_ms` default
-- to `created_at_ms` (every job stores it: a job HASH without it is no job), the others to the
-- constants below (xjobs_redis.rows.JOB_DEFAULTS holds the same). The columns an enqueue writes
-- and no settle changes go under a short field name (SHORT; xjobs_redis.rows.SHORT_FIELDS); the
-- others keep their column's name. A HASH written by the older layout holds every column under
-- its own name: each read asks for both names and a present field always wins over a default,
-- so it reads the same. Every read of a job goes through jget, jfield or whole.
local JOB_DEFAULTS = {
  state = 'ready', priority = '0', attempt = '0', claims = '0', max_attempts = '5',
  dead_letter = '1',
}
local SHORT = {
  run_id = 'r', name = 'n', idempotency_key = 'k', payload = 'p', created_at_ms = 'c',
  tenant_id = 't', enqueued_by = 'e', traceparent = 'tp', max_attempts = 'm', dead_letter = 'd',
  priority = 'pr',
}
local LONG = {}
for column, short in pairs(SHORT) do
  LONG[short] = column
end
local JOB_MARK = ':job:'
local DEFAULTED_COLUMNS = {
  'id', 'queue', 'run_at_ms', 'updated_at_ms', 'state', 'priority', 'attempt', 'claims',
  'max_attempts', 'dead_letter',
}

-- The job id a job key names (the text after `:job:`).
local function job_id_of(job)
  local at = string.find(job, JOB_MARK, 1, true)
  return string.sub(job, at + #JOB_MARK)
end

-- The queue a job key names (its hash tag `{P:q}` holds it after the first `:`).
local function job_queue_of(job)
  return string.match(job, '^[^{]*{[^:}]*:([^}]*)}')
end

-- A job column's value when its field is absent from a job that exists (nil when it has none).
local function job_default(job, field, created)
  if field == 'id' then
    return job_id_of(job)
  elseif field == 'queue' then
    return job_queue_of(job)
  elseif field == 'run_at_ms' or field == 'updated_at_ms' then
    return created
  end
  return JOB_DEFAULTS[field]
end

-- A read of job columns planned once (jread). A job HASH holds created_at_ms under `c` when an
-- enqueue of this layout made it, and then every SHORT column under its short field alone (no
-- writer sets a short column's own name on it): `fast` asks for `c`, created_at_ms, then each
-- column's field in that layout. A HASH of the older layout (created_at_ms under its own name) is
-- read again through `full`: created_at_ms first, each column's short field before its own name,
-- `at` where each column's first field stands. A script that reads the same columns of many jobs
-- plans the read once a call.
local function jplan(...)
  local names = {...}
  local fast, full, at, twin = {'c', 'created_at_ms'}, {'c', 'created_at_ms'}, {}, {}
  for i = 1, #names do
    local short = SHORT[names[i]]
    fast[#fast + 1] = short or names[i]
    at[i] = #full + 1
    if short then
      full[#full + 1] = short
      twin[i] = true
    end
    full[#full + 1] = names[i]
  end
  return {names = names, fast = fast, full = full, at = at, twin = twin}
end

-- HMGET of a planned read's columns with the defaults filled in: each value, false for a column
-- that is absent and has no default, and every value false when the job does not exist (a job
-- HASH without created_at_ms is no job). One HMGET of the job's own fields, a second for a HASH
-- of the older layout.
local function jread(job, plan)
  local raw = redis.call('HMGET', job, unpack(plan.fast))
  local names, f = plan.names, {}
  local created = raw[1]
  if created then
    for i = 1, #names do
      f[i] = raw[i + 2] or job_default(job, names[i], created) or false
    end
    return f
  end
  if not raw[2] then
    for i = 1, #names do
      f[i] = false
    end
    return f
  end
  raw = redis.call('HMGET', job, unpack(plan.full))
  created = raw[2]
  local at, twin = plan.at, plan.twin
  for i = 1, #names do
    local value = raw[at[i]]
    if not value and twin[i] then
      value = raw[at[i] + 1]
    end
    f[i] = value or job_default(job, names[i], created) or false
  end
  return f
end

-- jread of the columns named, planned for this one read.
local function jget(job, ...)
  return jread(job, jplan(...))
end

-- One job column with its default (false when absent without one, or the job is missing).
local function jfield(job, field)
  return jget(job, field)[1]
end

-- Whether a decoded JSON field holds a value (absent and null do not).
local function given(value)
  return value ~= nil and value ~= cjson.null
end

-- The idempotency namespace of an enqueue row: name NUL coalesce(tenant_id, '') NUL key.
local function row_namespace(row)
  local tenant = given(row.tenant_id) and row.tenant_id or ''
  return row.name .. '\0' .. tenant .. '\0' .. row.idempotency_key
end

-- The columns an enqueue stores only when given and not at their default (jget).
local OPTIONAL_COLUMNS = {
  'priority', 'run_at_ms', 'max_attempts', 'dead_letter', 'tenant_id', 'enqueued_by',
  'traceparent',
}

-- Enqueue one decoded row (enqueue.lua's row JSON) as the job HASH `job` of its queue's ready,
-- delayed, live and created keys. A row whose id already names a job answers that job (a
-- repeated publish, live or finished); a row whose namespace a live job holds answers the live
-- job; otherwise the job is created, indexed in ready (due now) or delayed, and its namespace
-- taken. A job due at its creation with priority 0 sits in ready in creation order already (its
-- score is its run_at, its created_at; ties by id), so only the others enter `created`: a plain
-- enqueue costs no index entry for the operator's lists. Answers {id, run_id, inserted}.
local function enqueue_row(job, ready, delayed, live, created, row, now)
  -- EXISTS first: a fresh id (the common case) costs no read of the HASH's fields
  if redis.call('EXISTS', job) == 1 then
    local run_id = jfield(job, 'run_id') -- every job stores it; the id is the key's
    if run_id then
      return {row.id, run_id, 0}
    end
  end
  -- the namespace taken first, in one call when it is free (a plain enqueue's case)
  local namespace = row_namespace(row)
  if redis.call('HSETNX', live, namespace, job) == 0 then
    local holder = redis.call('HGET', live, namespace)
    local f = jget(holder, 'id', 'run_id')
    if f[2] then
      return {f[1], f[2], 0}
    end
    redis.call('HSET', live, namespace, job) -- a stale entry: its job is gone
  end
  local run_at = given(row.run_at_ms) and row.run_at_ms or now
  -- the compact HASH: only what differs from its default (jget), in one HSET
  local put = {'r', row.run_id, 'n', row.name, 'k', row.idempotency_key, 'p', row.payload,
    'c', now}
  local optional = {
    priority = tonumber(row.priority) ~= 0 and row.priority or nil,
    run_at_ms = run_at ~= now and run_at or nil,
    max_attempts = tostring(row.max_attempts) ~= JOB_DEFAULTS.max_attempts and row.max_attempts
      or nil,
    dead_letter = not row.dead_letter and '0' or nil,
    tenant_id = given(row.tenant_id) and row.tenant_id or nil,
    enqueued_by = given(row.enqueued_by) and row.enqueued_by or nil,
    traceparent = given(row.traceparent) and row.traceparent or nil,
  }
  for _, field in ipairs(OPTIONAL_COLUMNS) do
    if optional[field] ~= nil then
      put[#put + 1] = SHORT[field] or field
      put[#put + 1] = optional[field]
    end
  end
  if given(row.link) then
    put[#put + 1] = 'link'
    put[#put + 1] = row.link
  end
  redis.call('HSET', job, unpack(put))
  if run_at <= now then
    redis.call('ZADD', ready, ready_score(row.priority, run_at), job)
  else
    redis.call('ZADD', delayed, run_at, job)
  end
  if not (tonumber(row.priority) == 0 and run_at == now) then
    redis.call('ZADD', created, now, job)
  end
  return {row.id, row.run_id, 1}
end

-- Compare-and-set a task's watermark in the scheduler's watermarks HASH: from `previous` (''
-- for a task with no watermark yet) to `watermark`. Answers whether it moved.
local function move_watermark(watermarks, task, previous, watermark)
  if (redis.call('HGET', watermarks, task) or '') ~= previous then
    return false
  end
  redis.call('HSET', watermarks, task, watermark)
  return true
end

-- The idempotency namespace of a job's name, tenant_id and key: name NUL coalesce(tenant_id,
-- '') NUL key.
local function namespace_from(name, tenant, key)
  return name .. '\0' .. (tenant or '') .. '\0' .. key
end

-- The idempotency namespace of a stored job.
local function namespace_of(job)
  local f = jget(job, 'name', 'tenant_id', 'idempotency_key')
  return namespace_from(f[1], f[2], f[3])
end

-- Release a namespace the job holds (a finished job no longer dedupes); one another job took
-- since stays.
local function release_held(live, namespace, job)
  if redis.call('HGET', live, namespace) == job then
    redis.call('HDEL', live, namespace)
  end
end

-- Release the job's namespace if it holds it.
local function release_namespace(job, live)
  release_held(live, namespace_of(job), job)
end

-- The fence of every settle: state running AND the claim (claimed_by, claims).
local function holds_claim(job, worker_id, claims)
  local f = jget(job, 'state', 'claimed_by', 'claims')
  return f[1] == 'running' and f[2] == worker_id and f[3] == claims
end

-- Hand a running job's lease back (every nack, and an event park): the leased index and the
-- lease dropped, and the attempt returned when it does not count (a shed, a park).
local function drop_lease(job, leased, counts_as_attempt)
  if not counts_as_attempt then
    local attempt = tonumber(jfield(job, 'attempt'))
    redis.call('HSET', job, 'attempt', math.max(attempt - 1, 0))
  end
  redis.call('HDEL', job, 'lease_until_ms')
  redis.call('ZREM', leased, job)
end

-- Make a job due at run_at: out of delayed, into ready under its claim-order score, as a claim
-- promotes a due delayed job.
local function file_ready(job, ready, delayed, run_at)
  redis.call('ZREM', delayed, job)
  redis.call('ZADD', ready, ready_score(jfield(job, 'priority'), run_at), job)
end

-- Put a job back in its queue as `state` (ready, or waiting for a park) at run_at: a due ready
-- job into ready, any other into delayed, which a claim promotes once it is due.
local function reschedule(job, ready, delayed, state, run_at, now)
  redis.call('HSET', job, 'state', state, 'run_at_ms', run_at)
  if state == 'ready' and run_at <= now then
    file_ready(job, ready, delayed, run_at)
  else
    redis.call('ZADD', delayed, run_at, job)
  end
end

-- File a finished job in its state's ZSET (score created_at_ms), for bulk requeue and retention.
local function file_finished(job, state_zset)
  redis.call('ZADD', state_zset, jfield(job, 'created_at_ms'), job)
end

-- Retention (xjobs_redis.purge): give a job that just finished, and its run's steps HASH (the
-- job key itself stands in when the caller did not know the run), the expiry its keep says.
-- `keep` is the policy's JSON, '' when retention is off or the run is unknown: {"s": {state: ms},
-- "n": {job name: ms}}, a name's own keep first. The expiry is relative, on the server's clock,
-- so a finished job's keys leave the server even when no purge runs (the purge trims the index
-- entries and attempt errors they leave).
local function expire_finished(job, steps, state, keep)
  if keep == nil or keep == '' then
    return
  end
  local policy = cjson.decode(keep)
  local ttl = policy.n[jfield(job, 'name')] or policy.s[state]
  if ttl then
    redis.call('PEXPIRE', job, ttl)
    redis.call('PEXPIRE', steps, ttl)
  end
end

-- Every column of a job, flat (column, value, ...) as HGETALL answers, under the columns' own
-- names (a short field wins over its older twin) and with the defaults of the absent ones
-- filled in (jget); {} for a missing job.
local function whole(job)
  local stored = redis.call('HGETALL', job)
  local columns, order = {}, {}
  for i = 1, #stored, 2 do
    local field, value = stored[i], stored[i + 1]
    local column = LONG[field] or field
    if columns[column] == nil then
      order[#order + 1] = column
    end
    if LONG[field] or columns[column] == nil then
      columns[column] = value
    end
  end
  local created = columns.created_at_ms
  if created then
    for _, column in ipairs(DEFAULTED_COLUMNS) do
      if columns[column] == nil then
        order[#order + 1] = column
        columns[column] = job_default(job, column, created)
      end
    end
  end
  local flat = {}
  for _, column in ipairs(order) do
    flat[#flat + 1] = column
    flat[#flat + 1] = columns[column]
  end
  return flat
end

-- Under the server's clock a slot key expires with its last slot, so a key no run comes back
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

-- JSON as the event match reads it. cjson decodes [] and {} alike (an empty table), so each
-- empty array outside a string is first rewritten to EMPTY_ARRAY: a string holding a NUL, which
-- no payload or match holds (xjobs.payload refuses NUL), so it equals only another []. cjson
-- also reads a number as a double (2^63-1000 and 2^63-872 are one double), so each number
-- outside a string is rewritten to a NUL-led string of its exact value (exact_number): two
-- numbers are equal exactly when their decimal values are, as Postgres' numeric and
-- xjobs.event_match have it (1 is 1.0, 1e30 is 10^30, a 64-bit id is only itself).
local EMPTY_ARRAY = '"\\u0000[]"'
local QUOTE, BACKSLASH, OPEN_BRACKET, CLOSE_BRACKET = 34, 92, 91, 93

-- A JSON number's exact value spelled one way: the sign, the digits without leading or trailing
-- zeros, and the power of ten ('-125e-1' for -12.50); zero is '0' whatever its sign.
local function exact_number(token)
  local sign, int, frac, exp = string.match(token, '^(%-?)(%d+)%.?(%d*)[eE]?([-+]?%d*)$')
  if sign == nil then
    return token -- not a number cjson would read: cjson refuses the text
  end
  local digits = string.gsub(int .. frac, '^0+', '')
  if digits == '' then
    return '0'
  end
  local trimmed = string.gsub(digits, '0+$', '')
  local power = (tonumber(exp) or 0) - #frac + #digits - #trimmed
  return sign .. trimmed .. 'e' .. power
end

local function decode_json(text)
  local parts, from, i = {}, 1, 1
  while true do
    i = string.find(text, '["%[%-%d]', i)
    if i == nil then
      break
    end
    local byte = string.byte(text, i)
    if byte == QUOTE then
      -- skip the string: to the first quote that no backslash escapes
      repeat
        local j = string.find(text, '["\\]', i + 1)
        if j == nil then
          return cjson.decode(text) -- unterminated: cjson refuses it
        end
        local escaped = string.byte(text, j) == BACKSLASH
        i = escaped and j + 1 or j
      until not escaped
    elseif byte == OPEN_BRACKET then
      local j = string.find(text, '[^ \t\n\r]', i + 1)
      if j ~= nil and string.byte(text, j) == CLOSE_BRACKET then
        parts[#parts + 1] = string.sub(text, from, i - 1)
        parts[#parts + 1] = EMPTY_ARRAY
        from = j + 1
        i = j
      end
    else
      local j = (string.find(text, '[^%d%.eE%+%-]', i) or #text + 1) - 1
      parts[#parts + 1] = string.sub(text, from, i - 1)
      parts[#parts + 1] = '"\\u0000' .. exact_number(string.sub(text, i, j)) .. '"'
      from = j + 1
      i = j
    end
    i = i + 1
  end
  parts[#parts + 1] = string.sub(text, from)
  return cjson.decode(table.concat(parts))
end

-- Deep JSON equality as xjobs.event_match has it: numbers by exact value (decode_json spells
-- each one), a boolean never a number, key order moot, null (cjson.null) only null. A non-empty
-- array's keys are numbers and an object's are strings, so the two never compare equal.
local function json_equal(a, b)
  if type(a) ~= type(b) then
    return false
  end
  if type(a) ~= 'table' then
    return a == b
  end
  local count = 0
  for k, v in pairs(a) do
    if b[k] == nil or not json_equal(v, b[k]) then
      return false
    end
    count = count + 1
  end
  for _ in pairs(b) do
    count = count - 1
  end
  return count == 0
end

-- The match rule: every top-level key of `match` is in `payload` with an equal JSON value.
local function json_matches(payload, match)
  for k, v in pairs(match) do
    if payload[k] == nil or not json_equal(payload[k], v) then
      return false
    end
  end
  return true
end

-- One bounded step of the look for the earliest event of one name (its `sent` ZSET: by
-- sent_at_ms, then id) sent at or after since_ms whose payload matches the decoded `match`: it
-- reads `batch` entries at most, those after the entry `after` (the cursor the step before
-- answered), or from since_ms when `after` is '' or was purged since (with every entry before it,
-- the purge taking the oldest first). Answers {'found', id, sent_at_ms, payload}, {'more', the
-- cursor} when the batch ran out first, or {} when no entry is left: a busy name never holds the
-- server for more than one batch.
local function first_match(sent, payloads, match, since_ms, after, batch)
  local rank = after ~= '' and redis.call('ZRANK', sent, after)
  local page
  if rank then
    page = redis.call('ZRANGE', sent, rank + 1, rank + batch, 'WITHSCORES')
  else
    page = redis.call('ZRANGEBYSCORE', sent, since_ms, '+inf', 'WITHSCORES', 'LIMIT', 0, batch)
  end
  for i = 1, #page, 2 do
    local payload = redis.call('HGET', payloads, page[i])
    if payload and json_matches(decode_json(payload), match) then
      return {'found', page[i], tonumber(page[i + 1]), payload}
    end
  end
  if #page < 2 * batch then
    return {}
  end
  return {'more', page[#page - 1]}
end

-- Drop a job's event wait (its entry, its event's index, its deadline) if it has one.
local function drop_wait(waits, deadlines, job_id)
  local raw = redis.call('HGET', waits, job_id)
  if raw then
    local index = cjson.decode(raw).index
    redis.call('SREM', index, job_id)
    redis.call('HDEL', waits, job_id)
    redis.call('ZREM', deadlines, job_id)
  end
  return raw ~= false
end

-- Counters: one-minute buckets of endings per job name and outcome, per queue, moved by the
-- settling script itself. A tier's HASH holds `bucket_ms|outcome|name` -> count (the name last,
-- so it may hold a bar) and its index ZSET holds the same fields by bucket_ms, so the rollup and
-- the trim find a bucket's fields without a scan. The retentions are xjobs_redis.counters'
-- (a test checks they agree).
local MINUTE_MS = 60000
local HOUR_MS = 3600000
local DAY_MS = 86400000
local MINUTE_RETENTION_MS = 2 * DAY_MS
local HOUR_RETENTION_MS = 30 * DAY_MS
local DAY_RETENTION_MS = 365 * DAY_MS
local COUNTER_TRIM = 2 -- expired minute fields a new field clears (bounded without a rollup)

local function bucket_of(at, size)
  return at - at % size
end

local function ms_text(ms)
  return string.format('%d', ms)
end

-- Add `n` to one field of a tier (its HASH and index ZSET); a new field expires the tier's keys
-- `retention` (plus one bucket) after its bucket, and clears up to COUNTER_TRIM expired fields,
-- so a tier never grows without bound even when no rollup runs.
local function add_count(counter, index, bucket, field, n, retention, size, now)
  if redis.call('HINCRBY', counter, field, n) == n then
    redis.call('ZADD', index, bucket, field)
    local cutoff = '(' .. ms_text(now - retention)
    local old = redis.call('ZRANGEBYSCORE', index, '-inf', cutoff, 'LIMIT', 0, COUNTER_TRIM)
    if #old > 0 then
      redis.call('HDEL', counter, unpack(old))
      redis.call('ZREM', index, unpack(old))
    end
    local ttl = math.max(bucket + retention + size - now, size)
    if redis.call('PTTL', counter) < ttl then
      redis.call('PEXPIRE', counter, ttl)
      redis.call('PEXPIRE', index, ttl)
    end
  end
end

-- Count one ending of job `name` as `outcome` in the minute bucket of `now` ('' counts nothing:
-- the caller passes only the counted outcomes).
local function count_ending(counter, index, name, outcome, now)
  if outcome == '' or not name then
    return
  end
  local bucket = bucket_of(now, MINUTE_MS)
  local field = ms_text(bucket) .. '|' .. outcome .. '|' .. name
  add_count(counter, index, bucket, field, 1, MINUTE_RETENTION_MS, MINUTE_MS, now)
end

-- Attempt errors: a queue's errors HASH holds, per job id, its last ERROR_HISTORY attempt errors
-- oldest first, each a JSON object {attempt, worker, at, text} on a line of its own (JSON escapes
-- every newline inside a string, so a line is one entry). A job that never failed has no field.
local ERROR_HISTORY = 25

local function record_error(errors, job_id, attempt, worker, now, text)
  local entry = cjson.encode({
    attempt = tonumber(attempt) or 0, worker = worker or cjson.null, at = now, text = text,
  })
  local history = redis.call('HGET', errors, job_id)
  if history then
    history = history .. '\n' .. entry
    local count = 1
    for _ in string.gmatch(history, '\n') do
      count = count + 1
    end
    while count > ERROR_HISTORY do
      history = string.sub(history, string.find(history, '\n', 1, true) + 1)
      count = count - 1
    end
  else
    history = entry
  end
  redis.call('HSET', errors, job_id, history)
end

-- Whether a state is live (ready, running, waiting).
local function is_live(state)
  return state == 'ready' or state == 'running' or state == 'waiting'
end

-- A finished job leaves the live jobs' indexes by creation and by waiting.
local function unfile_live(job, created, waiting)
  redis.call('ZREM', created, job)
  redis.call('ZREM', waiting, job)
end

-- A job back in its queue after a run (a retry, a park, a requeue) no longer sits in ready in
-- creation order, so it enters `created` (by created_at_ms) until it finishes.
local function file_created(job, created)
  redis.call('ZADD', created, jfield(job, 'created_at_ms'), job)
end

-- A settle's word to a result waiter: a job someone watches (its `watch` field, the channel a
-- `watch` call stored, read by the caller: false when absent) has its id published there once,
-- and the flag is consumed.
local function tell_waiter(job, channel)
  if channel then
    redis.call('HDEL', job, 'watch')
    redis.call('PUBLISH', channel, job_id_of(job))
  end
end

-- tell_waiter with the job's `watch` field read here: an unwatched job costs one HGET.
local function notify_settled(job)
  tell_waiter(job, redis.call('HGET', job, 'watch'))
end

-- A child's first ending (any finished state), recorded in its queue's endings HASH (the key its
-- `link` names, in this slot) for xjobs_redis.endings to apply to its group (another slot): a
-- child counts once (`counted`), so a requeued child's second ending records nothing. Answers 1
-- when it recorded one, else 0 (a job that is not a child costs one HGET).
local function record_ending(job, state)
  local link = redis.call('HGET', job, 'link')
  if not link or redis.call('HSETNX', job, 'counted', '1') == 0 then
    return 0
  end
  local endings = cjson.decode(link).x
  redis.call('HSET', endings, job_id_of(job), cjson.encode({link = link, state = state}))
  return 1
end

-- What complete_run reads of a job: the fence (as holds_claim), every column the settle reads,
-- and its waiter's channel.
local COMPLETE_READ = jplan('state', 'claimed_by', 'claims', 'name', 'tenant_id',
  'idempotency_key', 'created_at_ms', 'watch')

-- Settle a run completed, fenced on state running AND the claim (claimed_by, claims): the job
-- leaves the leased index and the live index by creation, releases its namespace, is filed in
-- `completed` (with its retention's expiry, its `steps` HASH too), its name's `completed`
-- counter moves, a watched one's id is published to its waiter, `result` (JSON; '' for none)
-- is stored, and a child's ending is recorded (record_ending). `queue` holds the queue's keys:
-- leased, live, completed, created, and its minute counters HASH and index (counter, index).
-- Answers 1 (2 when a child's ending was recorded), or 0 when the fence missed (nothing
-- written). ack.lua and ack_many.lua.
local function complete_run(job, steps, queue, worker_id, claims, keep, result, now)
  -- the fence (as holds_claim), every column the settle reads and the waiter, in one read
  local f = jread(job, COMPLETE_READ)
  if not (f[1] == 'running' and f[2] == worker_id and f[3] == claims) then
    return 0
  end
  redis.call('HSET', job, 'state', 'completed', 'finished_at_ms', now, 'updated_at_ms', now)
  redis.call('HDEL', job, 'lease_until_ms')
  if result ~= '' then
    redis.call('HSET', job, 'result', result)
  end
  local leased, created, live, completed = queue[1], queue[4], queue[2], queue[3]
  redis.call('ZREM', leased, job)
  redis.call('ZREM', created, job)
  release_held(live, namespace_from(f[4], f[5], f[6]), job)
  redis.call('ZADD', completed, f[7], job) -- as file_finished: score created_at_ms
  expire_finished(job, steps, 'completed', keep)
  count_ending(queue[5], queue[6], f[4], 'completed', now)
  tell_waiter(job, f[8])
  return 1 + record_ending(job, 'completed')
end
