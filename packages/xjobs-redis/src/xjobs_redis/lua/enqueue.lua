-- enqueue: one queue's batch, row by row (lib's enqueue_row: dedupe by id, then by the live
-- namespace, else create and index), so a later row sees what an earlier one inserted; the
-- queue joins the queue SET (a queue new to it inherits the job names paused deployment-wide),
-- and a PUBLISH of the queue on the wake channel follows when a row inserted here is due now (a
-- deduped or delayed row wakes nobody).
-- KEYS[1]      ready ZSET of the queue
-- KEYS[2]      delayed ZSET of the queue
-- KEYS[3]      live HASH of the queue (namespace -> job key)
-- KEYS[4]      the queue SET (every queue name)
-- KEYS[5]      created ZSET of the queue (live jobs by created_at_ms, as lib files them)
-- KEYS[6]      the deployment's pauses HASH (`kind|name` -> paused_at_ms)
-- KEYS[7]      the queue's SET of paused job names
-- KEYS[7 + r]  the job HASH of row r (r = 1 .. #ARGV - 3)
-- ARGV[1]      now in epoch ms, or '' for the server's clock
-- ARGV[2]      the queue's name
-- ARGV[3]      the wake channel
-- ARGV[3 + r]  row r as JSON: id, run_id, name, queue, tenant_id, idempotency_key,
--              payload, priority, run_at_ms, max_attempts, dead_letter, enqueued_by, traceparent
--              (tenant_id, run_at_ms, enqueued_by and traceparent may be null)
-- reply: one {id, run_id, inserted (1 or 0)} per row, in ARGV order

local now = clock_ms(ARGV[1])
local ready, delayed, live, created = KEYS[1], KEYS[2], KEYS[3], KEYS[5]
join_queue(KEYS[4], KEYS[6], KEYS[7], ARGV[2])

local out, due = {}, false
for r = 1, #ARGV - 3 do
  local row = cjson.decode(ARGV[3 + r])
  local reply = enqueue_row(KEYS[7 + r], ready, delayed, live, created, row, now)
  if reply[3] == 1 and not (given(row.run_at_ms) and row.run_at_ms > now) then
    due = true
  end
  out[#out + 1] = reply
end
if due then
  redis.call('PUBLISH', ARGV[3], ARGV[2])
end
return out
