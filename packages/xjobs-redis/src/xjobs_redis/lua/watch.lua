-- watch: flag a live job watched by a result waiter (subscribed to the channel beforehand): its
-- next settle (ack, a terminal nack, cancel, the claim's burial) publishes its id on ARGV[1] and
-- consumes the flag. A finished or missing job is left untouched; its state answers the waiter.
-- KEYS[1]  the job HASH
-- ARGV[1]  the queue's settled channel
-- reply: the job's state, or '' when it is missing

local job = KEYS[1]
local state = jfield(job, 'state')
if not state then
  return ''
end
if is_live(state) then
  redis.call('HSET', job, 'watch', ARGV[1])
end
return state
