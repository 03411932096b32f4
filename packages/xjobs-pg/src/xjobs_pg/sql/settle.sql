-- Every settle is fenced on state running AND the claim (claimed_by, claims): a write from a
-- worker whose claim moved on updates nothing, and the driver reports that it did not land.

-- fragment: watcher_of
-- The channel a result waiter watches the job of alias j on (results.sql result_watch), or null:
-- a row of result_watches, read only when the table holds any row (an InitPlan, once a
-- statement), or the watched column an older release set on the job row itself.
coalesce(j.watched,
         case when (select exists (select 1 from {schema}.result_watches))
              then (select w.channel from {schema}.result_watches w where w.job_id = j.id limit 1)
         end)

-- fragment: tell_watcher
-- A column of the RETURNING list of a statement that may finish jobs (alias j, its new values):
-- a job that finished and that a result waiter watches notifies that channel with its id.
-- An unwatched job notifies nothing, so its commit never queues on the notify lock. A watched
-- job finishes once (every finishing statement is fenced on a live state), so it notifies once.
case when j.finished_at_ms is not null and {watcher_of} is not null
     then pg_notify({watcher_of}, j.id::text) end as told

-- fragment: ack_open
-- The ack up to the end of its SET list: complete adds its result there.
with params as (
    select coalesce($1::bigint, (extract(epoch from now()) * 1000)::bigint) as now_ms
),
settled as (
    update {schema}.jobs j
    set state = 'completed', lease_until_ms = null, finished_at_ms = p.now_ms,
        updated_at_ms = p.now_ms, {child_ending}

-- fragment: ack_close
-- The rest of the ack: the fence, the watcher told, the counter (completed), the answer.
    from params p
    where j.id = $2 and j.state = 'running' and j.claimed_by = $3 and j.claims = $4
    returning j.id, j.name, j.parent_run_id, j.child_step, j.child_index, j.child_endings,
              p.now_ms, {tell_watcher}
),
ended as (
    select s.id, s.parent_run_id, s.child_step, s.child_index, s.child_endings = 1 as counts,
           false as failed
    from settled s
),
{resolve_groups},
counted as (
    select s.name, 'completed' as outcome, s.now_ms from settled s
),
{count_minute}
select count(*) as landed from settled

-- name: ack
-- Completes the run and bumps its minute counter (completed) in the same statement, resolves its
-- group when it is the last child of one (children.sql resolve_groups), and answers whether it
-- landed. It stores no result: a body that returned None.
-- $1 now, $2 job id, $3 worker, $4 claims.
{ack_open}
{ack_close};

-- name: complete
-- The ack with the result a body returned ($5, JSON text) written in the same fenced update.
-- $1 now, $2 job id, $3 worker, $4 claims, $5 the result.
{ack_open},
        result = $5::text
{ack_close};

-- name: ack_many
-- The ack of many runs in one statement: each row is fenced on its own claim ($2, $3, $4 are
-- parallel arrays of job id, worker and claim count), and answers the (id, claims) pairs that
-- landed. The batch bumps its minute counters with one upsert per job name, and resolves the
-- groups its children finish.
-- Each row is found by its id (jobs_pkey, one probe a row): the state of the fence is compared
-- to a scalar subquery, so the planner cannot match it to the predicate of jobs_leased and read
-- that partial index whole instead, with the entries every claim since its last vacuum left there
-- (a plan made while few jobs ran read 2,700 entries to ack 10).
with params as (
    select coalesce($1::bigint, (extract(epoch from now()) * 1000)::bigint) as now_ms
),
settled as (
    update {schema}.jobs j
    set state = 'completed', lease_until_ms = null, finished_at_ms = p.now_ms,
        updated_at_ms = p.now_ms, {child_ending}
    from params p, unnest($2::uuid[], $3::text[], $4::int[]) as c(id, worker_id, claims)
    where j.id = c.id and j.state = (select 'running'::text) and j.claimed_by = c.worker_id
      and j.claims = c.claims
    returning j.id, j.claims, j.name, j.parent_run_id, j.child_step, j.child_index,
              j.child_endings, p.now_ms, {tell_watcher}
),
ended as (
    select s.id, s.parent_run_id, s.child_step, s.child_index, s.child_endings = 1 as counts,
           false as failed
    from settled s
),
{resolve_groups},
counted as (
    select s.name, 'completed' as outcome, s.now_ms from settled s
),
{count_minute}
select s.id, s.claims from settled s;

-- name: nack
-- Stores the Nack the settle room decided, as handed: nothing here derives a state. When it
-- writes last_error it stores the attempt error too (the attempt is the one the claim counted,
-- before a hand-back), and a counted outcome bumps its minute counter, and a terminal state
-- resolves the group of a child by its policy, all in this statement.
-- Answers whether it landed.
-- $1 now, $2 job id, $3 worker, $4 claims, $5 the next state, $6 run_at (null: now), $7 one
-- when the attempt is handed back, $8 whether last_error is written, $9 the error, $10 whether
-- the state is terminal (run_at is kept, finished_at set), $11 the outcome when counters count
-- it (null: not counted).
with params as (
    select coalesce($1::bigint, (extract(epoch from now()) * 1000)::bigint) as now_ms
),
settled as (
    update {schema}.jobs j
    set state = $5,
        run_at_ms = case when $10::boolean then j.run_at_ms else coalesce($6::bigint, p.now_ms) end,
        attempt = greatest(j.attempt - $7::int, 0),
        last_error = case when $8::boolean then $9 else j.last_error end,
        finished_at_ms = case when $10::boolean then p.now_ms else null end,
        lease_until_ms = null,
        updated_at_ms = p.now_ms,
        child_endings = case when $10::boolean and j.child_index is not null
                             then coalesce(j.child_endings, 0) + 1 else j.child_endings end
    from params p
    where j.id = $2 and j.state = 'running' and j.claimed_by = $3 and j.claims = $4
    returning j.id, j.name, j.claims, j.attempt + $7::int as attempt, j.parent_run_id,
              j.child_step, j.child_index, j.child_endings, p.now_ms, {tell_watcher}
),
ended as (
    select s.id, s.parent_run_id, s.child_step, s.child_index, s.child_endings = 1 as counts,
           true as failed
    from settled s
    where $10::boolean
),
{resolve_groups},
failed_attempts as (
    select s.id as job_id, s.claims, s.attempt, $3::text as worker_id, s.now_ms as at_ms,
           $9::text as error
    from settled s
    where $8::boolean and $9::text is not null
),
{error_history},
counted as (
    select s.name, $11::text as outcome, s.now_ms from settled s where $11::text is not null
),
{count_minute}
select count(*) as landed from settled;

-- name: heartbeat
-- $1 now, $2 job id, $3 worker, $4 claims, $5 lease ms.
update {schema}.jobs
set lease_until_ms = coalesce($1::bigint, (extract(epoch from now()) * 1000)::bigint) + $5::bigint,
    updated_at_ms = coalesce($1::bigint, (extract(epoch from now()) * 1000)::bigint)
where id = $2 and state = 'running' and claimed_by = $3 and claims = $4;

-- name: record_progress
-- $1 now, $2 job id, $3 worker, $4 claims, $5 the progress.
update {schema}.jobs
set progress = $5,
    updated_at_ms = coalesce($1::bigint, (extract(epoch from now()) * 1000)::bigint)
where id = $2 and state = 'running' and claimed_by = $3 and claims = $4;
