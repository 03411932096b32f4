-- leader_acquire: take or renew the scheduler's leadership for ARGV[2] for ARGV[3] ms, as SET NX
-- PX would with a fenced renewal: a lapsed or absent holder is replaced, the holder itself is
-- renewed, a live other holder is left alone. Under the server's clock the key also expires
-- with the lease (PEXPIRE); under an injected clock only the stored expiry counts.
-- KEYS[1]  the leader HASH (holder, expires_ms)
-- ARGV[1]  now in epoch ms, or '' for the server's clock
-- ARGV[2]  the candidate
-- ARGV[3]  the lease's TTL in ms
-- reply: 1 when the candidate leads now, else 0

local now, server_time = clock_ms(ARGV[1])
local leader, candidate, ttl = KEYS[1], ARGV[2], tonumber(ARGV[3])
local f = redis.call('HMGET', leader, 'holder', 'expires_ms')
if f[1] and f[1] ~= candidate and tonumber(f[2]) > now then
  return 0
end
redis.call('HSET', leader, 'holder', candidate, 'expires_ms', now + ttl)
if server_time then
  redis.call('PEXPIRE', leader, ttl)
end
return 1
