-- scheduler_fire: the first step of one occurrence of a task, on the deployment's slot. The task's
-- watermark moves from the value the scheduler read to the occurrence and, only if it moved, the
-- fire is left pending with its job: xjobs_redis.scheduler then enqueues the job in its queue's
-- slot (enqueue.lua: deduped by id, so a second try finds the same job) and records the fire
-- (scheduler_fired.lua). A fire left pending by a scheduler that stopped between the steps is
-- completed by the next one to read the watermarks; until then the task fires no more (this
-- script refuses to move a watermark past a pending fire).
-- KEYS[1]  the scheduler's watermarks HASH (task -> watermark_ms)
-- KEYS[2]  the scheduler's pending HASH (task -> JSON {occurrence_ms, fired_at_ms, job})
-- ARGV[1]  now in epoch ms, or '' for the server's clock
-- ARGV[2]  the task's name
-- ARGV[3]  the watermark the scheduler read, or '' for a task with none yet
-- ARGV[4]  the occurrence in epoch ms (the new watermark)
-- ARGV[5]  the job as JSON (every field of xjobs' NewJob)
-- reply: the fire's instant in epoch ms when the watermark moved (the fire is pending; its job
--        is enqueued at that instant), else -1

local now = clock_ms(ARGV[1])
local task, occurrence = ARGV[2], ARGV[4]
if redis.call('HEXISTS', KEYS[2], task) == 1 then
  return -1
end
if not move_watermark(KEYS[1], task, ARGV[3], occurrence) then
  return -1
end
redis.call('HSET', KEYS[2], task, cjson.encode({
  occurrence_ms = tonumber(occurrence), fired_at_ms = now, job = ARGV[5],
}))
return now
