-- The Redis ceiling's settle of a batch: each id in ARGV leaves KEYS[1] (active) and its hash goes.
for _, id in ipairs(ARGV) do
  redis.call('ZREM', KEYS[1], id)
  redis.call('DEL', 'ceiling:job:' .. id)
end
return #ARGV
