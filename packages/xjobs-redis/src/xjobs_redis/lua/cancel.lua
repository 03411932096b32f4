-- cancel: cancel each given job of one queue, fenced on the live states (ready, running,
-- waiting); a finished job is left as it is. A running job's holder sees its next heartbeat miss
-- (the state is no longer running). Each cancel moves its name's `cancelled` counter and
-- publishes a watched job's id to its waiter; a child's ending is recorded (lib's record_ending:
-- the caller delivers the queue's endings after it).
-- KEYS[1]      ready ZSET of the queue
-- KEYS[2]      delayed ZSET of the queue
-- KEYS[3]      leased ZSET of the queue
-- KEYS[4]      live HASH of the queue
-- KEYS[5]      cancelled ZSET of the queue
-- KEYS[6]      created ZSET of the queue (live jobs by created_at_ms, as lib files them)
-- KEYS[7]      waiting ZSET of the queue (its waiting jobs by run_at_ms)
-- KEYS[8]      the queue's minute counters HASH
-- KEYS[9]      the queue's minute counters index ZSET
-- KEYS[9 + r]  the HASH of job r
-- ARGV[1]      now in epoch ms, or '' for the server's clock
-- ARGV[2]      the last_error to store
-- ARGV[3]      '1' to answer each cancelled job's fields, '0' for none (a bulk cancel)
-- reply: one per job, in KEYS order: {'missing'} | {'finished', state}
--        | {'cancelled', {field, value, ...}} (the whole job, or empty)

local now = clock_ms(ARGV[1])
local out = {}
for r = 10, #KEYS do
  local job = KEYS[r]
  local f = jget(job, 'state', 'name')
  local state = f[1]
  if not state then
    out[#out + 1] = {'missing'}
  elseif not is_live(state) then
    out[#out + 1] = {'finished', state}
  else
    redis.call('HSET', job, 'state', 'cancelled', 'finished_at_ms', now, 'last_error', ARGV[2],
      'updated_at_ms', now)
    redis.call('HDEL', job, 'lease_until_ms')
    redis.call('ZREM', KEYS[1], job)
    redis.call('ZREM', KEYS[2], job)
    redis.call('ZREM', KEYS[3], job)
    unfile_live(job, KEYS[6], KEYS[7])
    release_namespace(job, KEYS[4])
    file_finished(job, KEYS[5])
    count_ending(KEYS[8], KEYS[9], f[2], 'cancelled', now)
    notify_settled(job)
    record_ending(job, 'cancelled')
    out[#out + 1] = {'cancelled', ARGV[3] == '1' and whole(job) or {}}
  end
end
return out
