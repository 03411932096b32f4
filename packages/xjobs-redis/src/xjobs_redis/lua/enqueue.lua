-- enqueue: one queue's batch, row by row (lib's enqueue_row: dedupe by id, then by the live
-- namespace, else create and index), so a later row sees what an earlier one inserted, and a
-- PUBLISH of the queue on the wake channel follows when a row inserted here is due now (a
-- deduped or delayed row wakes nobody). A row with flow control (docs/flow-control.md) goes
-- through flow_row first: a debounced row moves the namespace's live job that no claim took yet
-- (ready, claims 0) to its new input, due the window after now; a throttled row answers the job
-- its namespace key names while that job's window is open. A queue that has not joined the
-- queue SET (no join marker: xjobs_redis.registry joins it in the deployment's slot, then sets
-- the marker) writes nothing and answers 'join', so every key here is in the queue's slot.
-- KEYS[1]      ready ZSET of the queue
-- KEYS[2]      delayed ZSET of the queue
-- KEYS[3]      live HASH of the queue (namespace -> job key)
-- KEYS[4]      the queue's join marker STRING
-- KEYS[5]      created ZSET of the queue (live jobs by created_at_ms, as lib files them)
-- KEYS[5 + r]  the job HASH of row r (r = 1 .. #ARGV - 3)
-- KEYS[row.tk] a throttled row's namespace HASH (`until`: throttle_until_ms, `job`: its job key)
-- ARGV[1]      now in epoch ms, or '' for the server's clock
-- ARGV[2]      the queue's name
-- ARGV[3]      the wake channel
-- ARGV[3 + r]  row r as JSON: id, run_id, name, queue, tenant_id, idempotency_key,
--              payload, priority, run_at_ms, max_attempts, dead_letter, enqueued_by, traceparent
--              (tenant_id, run_at_ms, enqueued_by and traceparent may be null), and for a row
--              with flow control debounce_ms, throttle_ms (one of them null) and tk
-- reply: one entry per row, in ARGV order: 1 when the row was inserted (its own id and run_id),
--        else {id, run_id} of the job that deduped it; or 'join' (nothing written)

local now, server_time = clock_ms(ARGV[1])
local ready, delayed, live, created = KEYS[1], KEYS[2], KEYS[3], KEYS[5]
if redis.call('EXISTS', KEYS[4]) == 0 then
  return 'join'
end

-- Debounce: the live job of the row's namespace, when still unclaimed, takes the row's input
-- and is due debounce_ms from now (out of ready into delayed, and so into created). Answers its
-- reply, or nil when no such job holds the namespace.
local function debounce(row)
  local holder = redis.call('HGET', live, row_namespace(row))
  if not holder then
    return nil
  end
  local f = jget(holder, 'id', 'run_id', 'state', 'claims')
  if f[3] ~= 'ready' or f[4] ~= '0' then
    return nil
  end
  local run_at = now + row.debounce_ms
  -- the short fields (lib's SHORT), and no older twin left beside them (a HASH of the old layout)
  redis.call('HSET', holder, 'p', row.payload, 'run_at_ms', run_at, 'updated_at_ms', now)
  redis.call('HDEL', holder, 'payload')
  for _, column in ipairs({'enqueued_by', 'traceparent'}) do
    if given(row[column]) then
      redis.call('HSET', holder, SHORT[column], row[column])
    else
      redis.call('HDEL', holder, SHORT[column])
    end
    redis.call('HDEL', holder, column)
  end
  redis.call('ZREM', ready, holder)
  redis.call('ZADD', delayed, run_at, holder)
  file_created(holder, created)
  return {f[1], f[2], 0}
end

-- Throttle: the job the namespace key names while its window is open (nil otherwise). The key
-- holds the job's key as this script was passed it, so no key name is built here.
local function throttled(key)
  local held = redis.call('HMGET', key, 'until', 'job')
  if not held[2] or tonumber(held[1]) <= now then
    return nil
  end
  local holder = held[2]
  local f = jget(holder, 'id', 'run_id')
  if not f[1] then
    return nil
  end
  return {f[1], f[2], 0}
end

local function flow_row(job, row)
  if redis.call('EXISTS', job) == 1 then
    return enqueue_row(job, ready, delayed, live, created, row, now)
  end
  if given(row.debounce_ms) then
    local reply = debounce(row)
    if reply then
      return reply
    end
    row.run_at_ms = now + row.debounce_ms
    return enqueue_row(job, ready, delayed, live, created, row, now)
  end
  local key = KEYS[row.tk]
  local reply = throttled(key) or enqueue_row(job, ready, delayed, live, created, row, now)
  if reply[3] == 1 then
    redis.call('HSET', key, 'until', now + row.throttle_ms, 'job', job)
    if server_time then
      redis.call('PEXPIRE', key, row.throttle_ms)
    end
  end
  return reply
end

local out, due = {}, false
for r = 1, #ARGV - 3 do
  local row = cjson.decode(ARGV[3 + r])
  local reply
  if row.debounce_ms == nil then
    reply = enqueue_row(KEYS[5 + r], ready, delayed, live, created, row, now)
  else
    reply = flow_row(KEYS[5 + r], row)
  end
  if reply[3] == 1 and not (given(row.run_at_ms) and row.run_at_ms > now) then
    due = true
  end
  out[#out + 1] = reply[3] == 1 and 1 or {reply[1], reply[2]} -- an insert: the row's own ids
end
if due then
  redis.call('PUBLISH', ARGV[3], ARGV[2])
end
return out
