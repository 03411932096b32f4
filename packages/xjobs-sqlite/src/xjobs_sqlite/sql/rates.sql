-- The rate store. Each call reads the rows of its keys, decides in Python (rates.py, the
-- contract's GCRA rule) and writes back the rows it moved, in one write transaction: the write
-- lock serialises the acquirers of every bucket, in every process.

-- name: rate_rows
select key, tat_ms, line_ms from rates where key in (select value from json_each(:keys));

-- name: rate_put
insert into rates (key, tat_ms, line_ms) values (:key, :tat_ms, :line_ms)
on conflict (key) do update set tat_ms = excluded.tat_ms, line_ms = excluded.line_ms;

-- name: rate_drop
-- A bucket idle again with no line ahead is a full one: its row goes.
delete from rates where key = :key;
