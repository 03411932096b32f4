-- scheduler_arm: move a task's watermark from the value the scheduler read to a new one, without
-- a job (a first sight, a skip); a watermark that moved meanwhile is left alone.
-- KEYS[1]  the scheduler's watermarks HASH (task -> watermark_ms)
-- ARGV[1]  the task's name
-- ARGV[2]  the watermark the scheduler read, or '' for a task with none yet
-- ARGV[3]  the new watermark_ms
-- reply: 1 when the watermark moved, else 0

return move_watermark(KEYS[1], ARGV[1], ARGV[2], ARGV[3]) and 1 or 0
