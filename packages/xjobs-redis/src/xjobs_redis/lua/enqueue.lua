-- enqueue: one queue's batch, row by row (lib's enqueue_row: dedupe by id, then by the live
-- namespace, else create and index), so a later row sees what an earlier one inserted.
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

local out = {}
for i = 2, #ARGV do
  out[#out + 1] = enqueue_row(KEYS[i + 2], ready, delayed, live, cjson.decode(ARGV[i]), now)
end
return out
