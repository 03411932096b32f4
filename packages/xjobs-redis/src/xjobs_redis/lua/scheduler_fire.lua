-- scheduler_fire: one occurrence of a task, atomically. The task's watermark moves from the value
-- the scheduler read to the occurrence; only if it moved is the job enqueued (lib's enqueue_row,
-- as enqueue.lua: dedupe by id, then by the live namespace; its queue joins the queue SET as an
-- enqueue's does) and the task's fire recorded with the job that answered (the new one, or the
-- live job holding its namespace).
-- The watermarks, fires, queue SET and pauses share the global slot and the job's keys are its
-- queue's, so this script crosses slots: it needs a standalone Redis, as the event bus does.
-- KEYS[1]   the scheduler's watermarks HASH (task -> watermark_ms)
-- KEYS[2]   the scheduler's fires HASH (task -> JSON {occurrence_ms, job_id, fired_at_ms})
-- KEYS[3]   ready ZSET of the job's queue
-- KEYS[4]   delayed ZSET of the job's queue
-- KEYS[5]   live HASH of the job's queue (namespace -> job key)
-- KEYS[6]   the job's HASH
-- KEYS[7]   created ZSET of the job's queue (live jobs by created_at_ms, as lib files them)
-- KEYS[8]   the queue SET (every queue name)
-- KEYS[9]   the deployment's pauses HASH (`kind|name` -> paused_at_ms)
-- KEYS[10]  the job's queue's SET of paused job names
-- ARGV[1]   now in epoch ms, or '' for the server's clock
-- ARGV[2]   the task's name
-- ARGV[3]   the watermark the scheduler read, or '' for a task with none yet
-- ARGV[4]   the occurrence in epoch ms (the new watermark)
-- ARGV[5]   the job's row as JSON, as enqueue.lua takes one
-- ARGV[6]   the job's queue name
-- reply: 1 when the watermark moved (the job enqueued or deduped, the fire recorded), else 0

local now = clock_ms(ARGV[1])
local task, occurrence = ARGV[2], ARGV[4]
if not move_watermark(KEYS[1], task, ARGV[3], occurrence) then
  return 0
end
join_queue(KEYS[8], KEYS[9], KEYS[10], ARGV[6])
local answer = enqueue_row(KEYS[6], KEYS[3], KEYS[4], KEYS[5], KEYS[7], cjson.decode(ARGV[5]),
  now)
redis.call('HSET', KEYS[2], task, cjson.encode({
  occurrence_ms = tonumber(occurrence), job_id = answer[1], fired_at_ms = now,
}))
return 1
