-- The Redis ceiling's enqueue: KEYS[1] the id counter, KEYS[2] the ready list, KEYS[3] the wake
-- list; ARGV the payloads. Each job is a hash of its payload; the ready list holds ids in order.
local first = redis.call('INCRBY', KEYS[1], #ARGV) - #ARGV
for n = 1, #ARGV do
  local id = first + n
  redis.call('HSET', 'ceiling:job:' .. id, 'payload', ARGV[n])
  redis.call('RPUSH', KEYS[2], id)
end
redis.call('LPUSH', KEYS[3], 1)
return first + 1
