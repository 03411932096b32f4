-- event_find: read-only; the earliest stored event of one name sent at or after since_ms whose
-- payload matches (each top-level key of the match present with an equal JSON value).
-- KEYS[1]  the event name's sent ZSET (event id by sent_at_ms)
-- KEYS[2]  the event payloads HASH (event id -> payload JSON)
-- ARGV[1]  the match's JSON object
-- ARGV[2]  since_ms
-- reply: {id, sent_at_ms, payload} of the earliest by (sent_at_ms, id), or nil

return first_match(KEYS[1], KEYS[2], decode_json(ARGV[1]), ARGV[2])
