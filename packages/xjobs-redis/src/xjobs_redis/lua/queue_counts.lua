-- queue_counts: read-only; one queue as an operator reads it. Each count is a ZCARD or a ZCOUNT
-- on the queue's indexes (never a scan), capped at ARGV[2]. Due ready and waiting jobs sit in
-- ready (or in delayed until a claim promotes them), the others in delayed, so `ready` is what is
-- due less the waiting ZSET's due part and `scheduled` what is not due less its later part.
-- `oldest_ready` is the run_at of the longest-due ready job: the first ready job of each priority
-- band of ready, and of the due part of delayed, passing over at most ARGV[3] waiting jobs.
-- KEYS[1]   ready ZSET of the queue
-- KEYS[2]   delayed ZSET of the queue
-- KEYS[3]   leased ZSET of the queue
-- KEYS[4]   waiting ZSET of the queue (its waiting jobs by run_at_ms)
-- KEYS[5]   dead ZSET of the queue
-- KEYS[6]   failed ZSET of the queue
-- KEYS[7]   the queue's pause flag (a STRING while the queue is paused)
-- KEYS[8]   created ZSET of the queue (live jobs by created_at_ms, as lib files them)
-- KEYS[9]   completed ZSET of the queue
-- KEYS[10]  cancelled ZSET of the queue
-- ARGV[1]   now in epoch ms (the operator's reading)
-- ARGV[2]   the cap of every count
-- ARGV[3]   the most entries to look at while finding the oldest ready job
-- reply: {ready, scheduled, running, waiting, dead, failed, oldest_ready_ms ('' for none),
--        paused (1 or 0), held (1 when the queue holds any job, live or finished, else 0)}

local ready, delayed, waiting = KEYS[1], KEYS[2], KEYS[4]
local now, cap, bound = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local function capped(n)
  return math.min(math.max(n, 0), cap)
end

local due = redis.call('ZCARD', ready) + redis.call('ZCOUNT', delayed, '-inf', now)
local later = redis.call('ZCOUNT', delayed, '(' .. now, '+inf')
local waiting_due = redis.call('ZCOUNT', waiting, '-inf', now)
local waiting_later = redis.call('ZCOUNT', waiting, '(' .. now, '+inf')

local oldest = nil
local looked = 0
local function first_ready(page)
  for _, job in ipairs(page) do
    looked = looked + 1
    local f = jget(job, 'state', 'run_at_ms')
    if f[1] == 'ready' then
      return tonumber(f[2])
    end
  end
  return nil
end
local function consider(run_at)
  if run_at and (not oldest or run_at < oldest) then
    oldest = run_at
  end
end
consider(first_ready(redis.call('ZRANGEBYSCORE', delayed, '-inf', now, 'LIMIT', 0, bound)))
local from = '-inf'
while looked < bound do
  local first = redis.call('ZRANGEBYSCORE', ready, from, '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
  if #first == 0 then
    break
  end
  local band = math.floor(tonumber(first[2]) / PRIORITY_SPAN)
  local band_end = '(' .. ms_text((band + 1) * PRIORITY_SPAN)
  local offset, found = 0, nil
  while not found and looked < bound do
    local page = redis.call('ZRANGEBYSCORE', ready, from, band_end, 'LIMIT', offset, 50)
    if #page == 0 then
      break
    end
    found = first_ready(page)
    offset = offset + #page
  end
  consider(found)
  from = ms_text((band + 1) * PRIORITY_SPAN)
end

return {
  capped(due - waiting_due),
  capped(later - waiting_later),
  capped(redis.call('ZCARD', KEYS[3])),
  capped(redis.call('ZCARD', waiting)),
  capped(redis.call('ZCARD', KEYS[5])),
  capped(redis.call('ZCARD', KEYS[6])),
  oldest and ms_text(oldest) or '',
  redis.call('EXISTS', KEYS[7]),
  redis.call('EXISTS', KEYS[1], KEYS[2], KEYS[3], KEYS[8], KEYS[5], KEYS[6], KEYS[9], KEYS[10])
    > 0 and 1 or 0,
}
