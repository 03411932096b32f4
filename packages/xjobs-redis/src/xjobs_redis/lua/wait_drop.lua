-- wait_drop: drop the event waits of removed jobs (each one's entry, its event's index, its
-- deadline), in their queue's slot; a job with no wait is skipped.
-- KEYS[1]  the queue's waits HASH (job id -> the wait's JSON)
-- KEYS[2]  the queue's wait deadlines ZSET (job id by deadline_ms)
-- ARGV[r]  the id of removed job r
-- reply: how many waits went

local dropped = 0
for r = 1, #ARGV do
  if drop_wait(KEYS[1], KEYS[2], ARGV[r]) then
    dropped = dropped + 1
  end
end
return dropped
