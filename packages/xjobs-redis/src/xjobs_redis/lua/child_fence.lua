-- child_fence: whether a parent still holds its claim (state running AND claimed_by, claims), in
-- the parent's slot; a spawn checks it before it writes a page (xjobs_redis.children).
-- KEYS[1]  the parent's job HASH
-- ARGV[1]  the claim's worker id
-- ARGV[2]  the claim's claims counter
-- reply: 1 when the claim holds, else 0

return holds_claim(KEYS[1], ARGV[1], ARGV[2]) and 1 or 0
