-- event_find: read-only; one bounded step of the look for the earliest stored event of one name
-- in one tenant (its sent ZSET) sent at or after since_ms whose payload matches (each top-level
-- key of the match present with an equal JSON value). It reads ARGV[4] entries at most, after
-- the cursor ARGV[3]; xjobs_redis.events repeats it with the cursor it answers, so a busy name
-- never holds the server for more than one batch.
-- KEYS[1]  the event name's sent ZSET in one tenant (event id by sent_at_ms)
-- KEYS[2]  the event payloads HASH (event id -> payload JSON)
-- ARGV[1]  the match's JSON object
-- ARGV[2]  since_ms
-- ARGV[3]  the cursor: the last event id the step before read, or '' for the first step
-- ARGV[4]  how many entries this step reads at most
-- reply: {'found', id, sent_at_ms, payload} of the earliest by (sent_at_ms, id); {'more', cursor}
--        when the batch ran out before a match; {} when no entry is left

return first_match(KEYS[1], KEYS[2], decode_json(ARGV[1]), ARGV[2], ARGV[3], tonumber(ARGV[4]))
