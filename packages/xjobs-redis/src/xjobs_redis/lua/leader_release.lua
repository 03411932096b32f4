-- leader_release: give the scheduler's leadership up if ARGV[1] holds it (a no-op otherwise).
-- KEYS[1]  the leader HASH (holder, expires_ms)
-- ARGV[1]  the candidate
-- reply: 1 when the candidate held it (now released), else 0

if redis.call('HGET', KEYS[1], 'holder') ~= ARGV[1] then
  return 0
end
return redis.call('DEL', KEYS[1])
