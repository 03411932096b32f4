-- The Redis ceiling's claim: up to ARGV[1] ids off KEYS[1] (ready) into KEYS[2] (active, scored
-- by lease deadline ARGV[2]); clears the wake list KEYS[3]. Returns id, payload pairs.
redis.call('DEL', KEYS[3])
local ids = redis.call('LPOP', KEYS[1], tonumber(ARGV[1]))
if not ids then
  return {}
end
local out = {}
for _, id in ipairs(ids) do
  redis.call('ZADD', KEYS[2], ARGV[2], id)
  out[#out + 1] = id
  out[#out + 1] = redis.call('HGET', 'ceiling:job:' .. id, 'payload')
end
return out
