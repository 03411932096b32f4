-- The one install point: every durable table of xjobs in the configured schema.
-- Idempotent: each statement is create if not exists, a shipped table grows by
-- alter table add column if not exists, and a renamed table moves in a do block guarded on
-- both names. The splitter cuts this file at semicolons outside a dollar-quoted body,
-- so no comment here may hold a semicolon or a quote character.

-- Two installers at once would race the create statements, so one waits for the other.
select pg_advisory_xact_lock(hashtextextended('xjobs.install', 0));

create schema if not exists {schema};

create table if not exists {schema}.schema_version (
    singleton boolean primary key default true check (singleton),
    version integer not null,
    installed_at timestamptz not null default now()
);

-- One row per job. Durable instants are epoch milliseconds from the injected clock.
create table if not exists {schema}.jobs (
    id uuid primary key,
    run_id uuid not null,
    name text not null,
    queue text not null,
    tenant_id text,
    idempotency_key text not null,
    payload text not null,
    state text not null default 'ready'
        check (state in ('ready', 'running', 'waiting', 'completed', 'failed', 'dead', 'cancelled')),
    priority smallint not null default 0,
    run_at_ms bigint not null,
    attempt integer not null default 0,
    max_attempts integer not null,
    dead_letter boolean not null default true,
    claims integer not null default 0,
    claimed_by text,
    lease_until_ms bigint,
    created_at_ms bigint not null,
    updated_at_ms bigint not null,
    finished_at_ms bigint,
    last_error text,
    progress double precision,
    enqueued_by text,
    traceparent text
);

-- The idempotency namespace among live rows. The enqueue conflict target and the live-row
-- lookup spell this same expression.
create unique index if not exists jobs_live_namespace
    on {schema}.jobs (name, coalesce(tenant_id, ''), idempotency_key)
    where state in ('ready', 'running', 'waiting');

-- The claim of due rows: a partial index scan in claim order, per queue.
create index if not exists jobs_claimable
    on {schema}.jobs (queue, priority, run_at_ms, id)
    where state in ('ready', 'waiting');

-- The rescue of lapsed leases, and the burial of exhausted ones.
create index if not exists jobs_leased
    on {schema}.jobs (queue, lease_until_ms)
    where state = 'running';

-- The operator index, one for every read that is not the claim: a list page newest first,
-- a bulk verb oldest first, and the bounded counts of a queue, each in one queue and one state
-- at a time (the statements walk every known queue by a loose scan of its first column, one
-- index descent a queue, and every asked state). One composite index, not one a filter: every
-- index on jobs costs each enqueue, claim and settle a write, so queue, state and the keyset
-- (created_at_ms, id) share one. It replaces jobs_finished of version 5, whose reads (finished
-- rows by state, oldest first) it serves in each queue.
create index if not exists jobs_listed
    on {schema}.jobs (queue, state, created_at_ms, id);

drop index if exists {schema}.jobs_finished;

create table if not exists {schema}.workers (
    id text primary key,
    host text not null,
    pid integer not null,
    queues text[] not null,
    started_at_ms bigint not null,
    last_seen_ms bigint not null,
    expires_at_ms bigint not null
);

-- Version 5 renamed the fleet slot table from leases to slots: an older schema keeps its rows
-- under the new name. The rename runs only while leases exists and slots does not, under the
-- install lock above, so installing again (or a second installer waiting on it) moves nothing.
do $$
begin
    if to_regclass('{schema}.leases') is not null and to_regclass('{schema}.slots') is null then
        alter table {schema}.leases rename to slots;
    end if;
    if exists (select 1 from pg_constraint
               where conrelid = to_regclass('{schema}.slots') and conname = 'leases_pkey') then
        alter table {schema}.slots rename constraint leases_pkey to slots_pkey;
    end if;
end
$$;

-- Fleet concurrency slots: one row per held slot, owned by a job id under one claim.
create table if not exists {schema}.slots (
    key text not null,
    job_id text not null,
    claims integer not null,
    expires_at_ms bigint not null,
    primary key (key, job_id, claims)
);

-- Durable steps: one row per step of a run. A done row is never overwritten (the upsert
-- of step_put is fenced on it), so a memoized result survives every replay.
create table if not exists {schema}.steps (
    run_id uuid not null,
    name text not null,
    status text not null check (status in ('done', 'error', 'pending')),
    result text,
    error text,
    position integer not null,
    created_at_ms bigint not null,
    primary key (run_id, name)
);

-- Sent events, kept for waits that begin before them until the purge. The index serves the
-- lookup of the earliest match of a name since an instant, in (sent_at, id) order.
create table if not exists {schema}.events (
    id uuid primary key,
    name text not null,
    payload jsonb not null,
    sent_at_ms bigint not null
);

create index if not exists events_by_name
    on {schema}.events (name, sent_at_ms, id);

-- A parked run registered for one event: at most one wait per job, replaced by its next wait.
create table if not exists {schema}.event_waits (
    job_id uuid primary key,
    run_id uuid not null,
    queue text not null,
    step text not null,
    event text not null,
    match jsonb not null,
    since_ms bigint not null,
    deadline_ms bigint
);

create index if not exists event_waits_by_event
    on {schema}.event_waits (event);

-- The scheduler. A task watermark is the fence every fire moves, by compare-and-set from the
-- value the scheduler read: every occurrence at or before it is done with.
create table if not exists {schema}.task_watermarks (
    task text primary key,
    watermark_ms bigint not null
);

-- The last occurrence of each task that dispatched a job, and the job it landed on. The not null
-- of job_id is a fence of task_fire: a fire that cannot name its job rolls back whole.
create table if not exists {schema}.task_fires (
    task text primary key,
    occurrence_ms bigint not null,
    job_id uuid not null,
    fired_at_ms bigint not null
);

-- A paused task has a row here (its watermark is kept).
create table if not exists {schema}.task_pauses (
    task text primary key,
    paused_at_ms bigint not null
);

-- Leader election by lease: one row per election, held by one candidate until it expires.
create table if not exists {schema}.leaders (
    name text primary key,
    holder text not null,
    expires_at_ms bigint not null
);

-- The transactional outbox: each row a complete job staged inside a caller transaction, its id
-- the id of the job the relay publishes. A relay leases rows (claimed_by until claim_until_ms),
-- every later write is fenced on claimed_by, and a published row is kept (published_at_ms) until
-- the retention of outbox_mark deletes it. run_at_ms stays null for a job due at its enqueue.
create table if not exists {schema}.outbox (
    id uuid primary key,
    run_id uuid not null,
    name text not null,
    queue text not null,
    tenant_id text,
    idempotency_key text not null,
    payload text not null,
    priority smallint not null,
    run_at_ms bigint,
    max_attempts integer not null,
    dead_letter boolean not null,
    enqueued_by text,
    traceparent text,
    staged_at_ms bigint not null,
    claimed_by text,
    claim_until_ms bigint,
    published_at_ms bigint
);

-- The relay claim: unpublished rows, oldest staged first.
create index if not exists outbox_unpublished
    on {schema}.outbox (staged_at_ms, id)
    where published_at_ms is null;

-- The retention of published rows, oldest published first.
create index if not exists outbox_published
    on {schema}.outbox (published_at_ms)
    where published_at_ms is not null;

-- Version 6, the operator surface. Each attempt error a settle stored: the nack that writes
-- last_error writes its row, and so does the burial of a lapsed final attempt, in the same
-- statement. Keyed by the claim count, the fencing token, so one claim writes at most one error
-- and the key orders them oldest first. The writing statement drops the oldest of its job past
-- 25 rows (MAX_ERROR_HISTORY). A removed job takes its rows along.
create table if not exists {schema}.attempt_errors (
    job_id uuid not null,
    claims integer not null,
    attempt integer not null,
    worker_id text,
    at_ms bigint not null,
    error text not null,
    primary key (job_id, claims)
);

-- Counters: how many runs of a job name ended with an outcome in a bucket of a tier. A settle
-- bumps its minute row in the settling statement. A minute row is spread over shards (the
-- settling backend pid modulo 8) so concurrent settles of one job name seldom wait on one row
-- lock, and every read sums the shards. Hour and day rows are written by the rollup alone, in
-- shard 0. The key serves the rollup scan of unfolded minutes and a read of a tier since an
-- instant.
create table if not exists {schema}.counters (
    tier text not null check (tier in ('minute', 'hour', 'day')),
    bucket_ms bigint not null,
    name text not null,
    outcome text not null,
    shard smallint not null,
    count bigint not null,
    primary key (tier, bucket_ms, name, outcome, shard)
);

-- The minute buckets folded into their hour and day. The rollup inserts a bucket here before
-- folding it, and folds only the buckets its insert landed, so a bucket is folded at most once,
-- even by two rollups at once (the second waits on the first and then finds the bucket taken).
create table if not exists {schema}.counter_folds (
    bucket_ms bigint primary key,
    folded_at_ms bigint not null
);

-- Pauses the claim reads (not exists): a whole queue, or one job name in every queue. A task
-- pause stays in task_pauses, which only the scheduler reads.
create table if not exists {schema}.pauses (
    kind text not null check (kind in ('queue', 'job')),
    name text not null,
    paused_at_ms bigint not null,
    primary key (kind, name)
);

-- Version 7, results. result is the JSON text a job body returned, stored by the fenced
-- complete that settles its run, and cleared by a requeue. It is text, not jsonb: the codec
-- hands the text it bounded by result_max_bytes and a reader decodes that same text, so it is
-- kept byte for byte (jsonb would reparse it on every write, reorder its keys and drop duplicate
-- ones). watched is the channel of a result waiter: set by the watch of a live job, it makes the
-- statement that finishes the job notify that channel with the job id, and a job no one waits on
-- never notifies (every notifying commit takes one server wide lock). No index reads either.
alter table {schema}.jobs add column if not exists result text;

alter table {schema}.jobs add column if not exists watched text;

insert into {schema}.schema_version (singleton, version) values (true, 7)
    on conflict (singleton) do update set version = greatest({schema}.schema_version.version, excluded.version);

-- Version 8, payloads as text. jobs.payload and outbox.payload hold the JSON text the codec
-- encoded, byte for byte, as results do (version 7): jsonb would reparse it on every enqueue and
-- change what the body decodes (numeric numbers turn -0.0 into 0 and 1e300 into an integer inside
-- an untyped field). The event payload stays jsonb, for its match operators. A schema installed
-- before moves each column once, guarded on its current type, so installing again changes nothing.
do $$
begin
    if (select a.atttypid from pg_attribute a
        where a.attrelid = to_regclass('{schema}.jobs') and a.attname = 'payload') = 'jsonb'::regtype then
        alter table {schema}.jobs alter column payload type text using payload::text;
    end if;
    if (select a.atttypid from pg_attribute a
        where a.attrelid = to_regclass('{schema}.outbox') and a.attname = 'payload') = 'jsonb'::regtype then
        alter table {schema}.outbox alter column payload type text using payload::text;
    end if;
end
$$;

insert into {schema}.schema_version (singleton, version) values (true, 8)
    on conflict (singleton) do update set version = greatest({schema}.schema_version.version, excluded.version);

-- Version 8, retention (xjobs.purge, sql/purge.sql). The purge of finished jobs walks this index:
-- a loose scan finds each (finished state, job name) pair, and each pair is read oldest finish
-- first up to the batch size, so a batch never scans the table. It is partial, so a live row
-- never enters it: a row is added once, by the statement that finishes it, which moves state (an
-- indexed column) and so was never a HOT update, and the enqueue, the claim and the heartbeat
-- pay nothing for it.
create index if not exists jobs_purgeable
    on {schema}.jobs (state, name, finished_at_ms)
    where state in ('completed', 'failed', 'dead', 'cancelled');

-- The purge of sent events oldest first, and of waits whose deadline lapsed.
create index if not exists events_sent
    on {schema}.events (sent_at_ms);

create index if not exists event_waits_deadline
    on {schema}.event_waits (deadline_ms)
    where deadline_ms is not null;

-- Table health for a queue. A job row is updated several times in its short life (claim,
-- heartbeats, progress, the settle) and then deleted by the purge, so the table churns like no
-- other. fillfactor 80 leaves a fifth of each heap page free, so the new version of an updated row
-- fits on its own page: a progress write or a watch (no indexed column) is a HOT update that adds
-- no index entry, and the others stay on the page instead of spreading the table. The default
-- autovacuum waits for a fifth of the table to be dead before it runs, which on a large table is
-- millions of dead rows that the claim index scans step over, so vacuum here runs after 1 percent
-- (plus 1000 rows) is dead or inserted, and analyze after 2 percent: many small vacuums, each
-- short. The cost limit stays the server default: a vacuum let run faster during a purge of a
-- million rows took the IO and WAL a claim and a settle commit on (the bench, W9). Each setting
-- is a storage parameter: setting it again is a no-op, an installed table takes it with no
-- rewrite (the fillfactor applies to pages written from then on), and no lock a claim waits on
-- is held past the install transaction.
alter table {schema}.jobs set (
    fillfactor = 80,
    autovacuum_vacuum_scale_factor = 0.01,
    autovacuum_vacuum_threshold = 1000,
    autovacuum_vacuum_insert_scale_factor = 0.01,
    autovacuum_vacuum_insert_threshold = 1000,
    autovacuum_analyze_scale_factor = 0.02
);

-- The side tables a purge deletes from in step with jobs: vacuumed as early, so the space the
-- purge frees is reused instead of growing them.
alter table {schema}.steps set (
    autovacuum_vacuum_scale_factor = 0.02,
    autovacuum_analyze_scale_factor = 0.05
);

alter table {schema}.attempt_errors set (
    autovacuum_vacuum_scale_factor = 0.02,
    autovacuum_analyze_scale_factor = 0.05
);

insert into {schema}.schema_version (singleton, version) values (true, 8)
    on conflict (singleton) do update set version = greatest({schema}.schema_version.version, excluded.version);

-- Version 9, fleet rate limits (sql/rates.sql): one GCRA bucket per key, its theoretical arrival
-- time in epoch ms (a row whose time has passed is an idle, full bucket), and its deferral line,
-- the instant the next run refused by the full bucket is due.
create table if not exists {schema}.rates (
    key text primary key,
    tat_ms double precision not null,
    line_ms double precision not null default 0
);

insert into {schema}.schema_version (singleton, version) values (true, 9)
    on conflict (singleton) do update set version = greatest({schema}.schema_version.version, excluded.version);

-- Version 10, throttle on enqueue (docs/flow-control.md, sql/jobs.sql enqueue_flow).
-- throttle_until_ms is set only on a job a throttled enqueue created: its creation plus the
-- window, during which a throttled enqueue of its namespace answers it, live or finished. The
-- index is partial, so a plain enqueue adds no entry to it and pays nothing for the column.
alter table {schema}.jobs add column if not exists throttle_until_ms bigint;

create index if not exists jobs_throttled
    on {schema}.jobs (name, coalesce(tenant_id, ''), idempotency_key, throttle_until_ms)
    where throttle_until_ms is not null;

insert into {schema}.schema_version (singleton, version) values (true, 10)
    on conflict (singleton) do update set version = greatest({schema}.schema_version.version, excluded.version);

-- Version 11, the backfill ledger (sql/backfills.sql): one row per run of a sweep, what it SWEPT
-- (the cursor JSON and the count after its last recorded batch). Only a completed row blocks a
-- sweep from running again: the partial index is the verdict the gate and the pending view read.
create table if not exists {schema}.backfills (
    run_id text primary key,
    job_id text not null,
    name text not null,
    checksum text not null,
    environment text not null,
    tenant text,
    status text not null check (status in ('running', 'completed', 'failed')),
    cursor text,
    count bigint not null default 0,
    batches bigint not null default 0,
    error text,
    started_at_ms bigint not null,
    updated_at_ms bigint not null,
    finished_at_ms bigint
);

create index if not exists backfills_started on {schema}.backfills (name, started_at_ms desc);

create index if not exists backfills_completed
    on {schema}.backfills (name, checksum, environment, finished_at_ms)
    where status = 'completed';

insert into {schema}.schema_version (singleton, version) values (true, 11)
    on conflict (singleton) do update set version = greatest({schema}.schema_version.version, excluded.version);

-- Version 12, the webhook ledger (sql/webhooks.sql): one row per endpoint (its attempt sequence,
-- its current run of failures and when it was disabled) and its newest attempts, keyed by
-- (endpoint, seq). A record moves the endpoint row and appends the attempt in one statement, so
-- two deliveries to one endpoint serialise on its row.
create table if not exists {schema}.webhook_endpoints (
    endpoint text primary key,
    seq bigint not null default 0,
    failures integer not null default 0,
    disabled_at_ms bigint
);

create table if not exists {schema}.webhook_attempts (
    endpoint text not null,
    seq bigint not null,
    message_id text not null,
    job_id text not null,
    attempt integer not null,
    status text not null check (status in ('delivered', 'failed', 'rejected', 'skipped')),
    http_status integer,
    latency_ms bigint not null,
    excerpt text not null,
    error text,
    at_ms bigint not null,
    primary key (endpoint, seq)
);

insert into {schema}.schema_version (singleton, version) values (true, 12)
    on conflict (singleton) do update set version = greatest({schema}.schema_version.version, excluded.version);

-- Version 13, the result waiters watches (sql/results.sql): a row per waiting call, apart from
-- the job row, which a watch then never updates (a claim skips a row an update holds). A
-- finishing statement notifies the channel of a watched job (settle.sql watcher_of). A wait
-- deletes its row when it ends, and an expired row, left by a process that died waiting, goes
-- with the next watch. jobs.watched, which version 7 added for the same end, is still read for
-- the rows an older release flagged. Every wait inserts and deletes a row, and every finishing
-- statement asks whether the table holds any, so vacuum runs after 100 dead rows, not a fifth.
create table if not exists {schema}.result_watches (
    job_id uuid not null,
    token text not null,
    channel text not null,
    expires_at_ms bigint not null,
    primary key (job_id, token)
);

create index if not exists result_watches_expiry on {schema}.result_watches (expires_at_ms);

alter table {schema}.result_watches set (
    autovacuum_vacuum_scale_factor = 0,
    autovacuum_vacuum_threshold = 100
);

insert into {schema}.schema_version (singleton, version) values (true, 13)
    on conflict (singleton) do update set version = greatest({schema}.schema_version.version, excluded.version);

-- Version 14, events scoped by tenant (issue 40). An event is stored with the tenant it was sent
-- in and a wait with the tenant of its run, the untenanted scope spelled as the empty string (no
-- org id is empty, the bus refuses one), so the column is not null and the lookups are plain
-- equality on an index. Rows written before version 14 are of the untenanted scope: a wait parked
-- by an older release is woken by an untenanted send or its timeout, and moves to the tenant of
-- its run at its next park. The find and the look of a park read (tenant, name, sent_at, id), the
-- wake of a send (tenant, event), so the indexes of version 1 on the name alone go.
alter table {schema}.events add column if not exists tenant text not null default '';

alter table {schema}.event_waits add column if not exists tenant text not null default '';

create index if not exists events_by_tenant_name
    on {schema}.events (tenant, name, sent_at_ms, id);

create index if not exists event_waits_by_tenant_event
    on {schema}.event_waits (tenant, event);

drop index if exists {schema}.events_by_name;

drop index if exists {schema}.event_waits_by_event;

insert into {schema}.schema_version (singleton, version) values (true, 14)
    on conflict (singleton) do update set version = greatest({schema}.schema_version.version, excluded.version);

-- Version 15, child jobs (issue 44, sql/children.sql). A child row names the job that spawned it
-- (parent_id), the group it belongs to (the parent run and the step that spawned it, the key of
-- child_groups), its index in that group, and whether it is detached (a cancel of the parent
-- does not reach it). child_endings counts its endings: the first one (a terminal write moving it
-- from 0 to 1) is the one counted into its group, so a requeued child that ends again moves
-- nothing. The columns are nullable with no default, so the add is a catalogue change, and the
-- index is partial: a job with no parent adds no entry to it. It serves the children of a parent
-- (the cascade of a cancel, the counts of a family) and a group in index order (a page).
alter table {schema}.jobs add column if not exists parent_id uuid;

alter table {schema}.jobs add column if not exists parent_run_id uuid;

alter table {schema}.jobs add column if not exists child_step text;

alter table {schema}.jobs add column if not exists child_index integer;

alter table {schema}.jobs add column if not exists detached boolean;

alter table {schema}.jobs add column if not exists child_endings integer;

create index if not exists jobs_children
    on {schema}.jobs (parent_id, parent_run_id, child_step, child_index)
    where parent_id is not null;

-- A group of children, written by its first spawn page. Its count of children yet to end is
-- spread over child_shards (a child is in shard index modulo 16, each shard holding from the
-- start how many of the total it will see), so the endings of thousands of children of one
-- parent do not all queue on one row lock: an ending child moves its shard, and only the
-- statement that empties a shard (open_shards) or counts a failure moves the group row. The
-- statement that resolves the group (open_shards reaching 0, or its first failure when it fails
-- fast) sets resolved and, when the parent parked on it, makes the parent due in the same
-- statement. Lock order: a park locks the parent row, then the group row. A terminal write locks
-- the job rows it ends, then shards, then groups, then parents, each set in key order.
create table if not exists {schema}.child_groups (
    parent_run_id uuid not null,
    step text not null,
    parent_id uuid not null,
    total integer not null,
    spawned integer not null default 0,
    wait boolean not null,
    fail_fast boolean not null,
    detached boolean not null,
    open_shards integer not null,
    failed integer not null default 0,
    first_failed integer,
    resolved boolean not null default false,
    parked boolean not null default false,
    created_at_ms bigint not null,
    primary key (parent_run_id, step)
);

-- The purge of a finished parent deletes its groups by parent_id.
create index if not exists child_groups_parent on {schema}.child_groups (parent_id);

create table if not exists {schema}.child_shards (
    parent_run_id uuid not null,
    step text not null,
    shard smallint not null,
    pending integer not null,
    primary key (parent_run_id, step, shard)
);

insert into {schema}.schema_version (singleton, version) values (true, 15)
    on conflict (singleton) do update set version = greatest({schema}.schema_version.version, excluded.version);
