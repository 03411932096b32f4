-- What a pooling proxy in front of Postgres changes: the check that finds an undeclared one.

-- name: backend_pid
-- The pid of the server session that runs this statement: a pooling proxy hands its clients a
-- made-up pid of its own at connect, so the two differ behind one.
select pg_backend_pid() as pid;
