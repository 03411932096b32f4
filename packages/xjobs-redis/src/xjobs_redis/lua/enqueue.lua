-- enqueue: one queue's batch, row by row, so a later row sees what an earlier one inserted.
-- A row whose id already names a job answers that job (a repeated publish, live or finished);
-- a row whose namespace a live job holds answers the live job; otherwise the job is created,
-- indexed in ready (due now) or delayed, and its namespace taken.
-- KEYS[1]      ready ZSET of the queue
-- KEYS[2]      delayed ZSET of the queue
-- KEYS[3]      live HASH of the queue (namespace -> job key)
-- KEYS[2 + i]  the job HASH of row i (i = 2 .. #ARGV)
-- ARGV[1]      now in epoch ms, or '' for the server's clock
-- ARGV[i]      row i (i >= 2) as JSON: id, run_id, name, queue, tenant_id, idempotency_key,
--              payload, priority, run_at_ms, max_attempts, dead_letter, enqueued_by, traceparent
--              (tenant_id, run_at_ms, enqueued_by and traceparent may be null)
-- reply: one {id, run_id, inserted (1 or 0)} per row, in ARGV order

local now = clock_ms(ARGV[1])
local ready, delayed, live = KEYS[1], KEYS[2], KEYS[3]

local function given(value)
  return value ~= nil and value ~= cjson.null
end

local out = {}
for i = 2, #ARGV do
  local job = KEYS[i + 2]
  local row = cjson.decode(ARGV[i])
  local tenant = given(row.tenant_id) and row.tenant_id or ''
  local namespace = row.name .. '\0' .. tenant .. '\0' .. row.idempotency_key
  local answer = nil
  if redis.call('EXISTS', job) == 1 then
    local f = redis.call('HMGET', job, 'id', 'run_id')
    answer = {f[1], f[2], 0}
  else
    local holder = redis.call('HGET', live, namespace)
    if holder then
      local f = redis.call('HMGET', holder, 'id', 'run_id')
      if f[1] then
        answer = {f[1], f[2], 0}
      end
    end
  end
  if answer == nil then
    local run_at = given(row.run_at_ms) and row.run_at_ms or now
    redis.call('HSET', job,
      'id', row.id, 'run_id', row.run_id, 'name', row.name, 'queue', row.queue,
      'idempotency_key', row.idempotency_key, 'payload', row.payload,
      'priority', row.priority, 'run_at_ms', run_at, 'max_attempts', row.max_attempts,
      'dead_letter', row.dead_letter and '1' or '0', 'created_at_ms', now, 'updated_at_ms', now,
      'state', 'ready', 'attempt', 0, 'claims', 0)
    if given(row.tenant_id) then
      redis.call('HSET', job, 'tenant_id', row.tenant_id)
    end
    if given(row.enqueued_by) then
      redis.call('HSET', job, 'enqueued_by', row.enqueued_by)
    end
    if given(row.traceparent) then
      redis.call('HSET', job, 'traceparent', row.traceparent)
    end
    if run_at <= now then
      redis.call('ZADD', ready, ready_score(row.priority, run_at), job)
    else
      redis.call('ZADD', delayed, run_at, job)
    end
    redis.call('HSET', live, namespace, job)
    answer = {row.id, row.run_id, 1}
  end
  out[#out + 1] = answer
end
return out
