-- The one install point: every table and index of the driver, created on first open in one
-- BEGIN IMMEDIATE transaction (two processes opening a new file at once take turns). Idempotent:
-- each statement is create if not exists. The splitter cuts the ddl block at semicolons, so no
-- comment in it may hold one. Durable instants are epoch milliseconds from the injected clock.

-- name: installed_version
select version from schema_version where singleton = 1;

-- name: set_version
insert into schema_version (singleton, version, installed_at_ms) values (1, :version, :now)
on conflict (singleton) do update set version = excluded.version, installed_at_ms = excluded.installed_at_ms;

-- name: ddl
create table if not exists schema_version (
    singleton integer primary key check (singleton = 1),
    version integer not null,
    installed_at_ms integer not null
);

-- One row per job. dead_letter is 0 or 1. result is the JSON text a body returned (results),
-- throttle_until_ms the end of a throttled enqueue's window (flow control).
create table if not exists jobs (
    id text primary key,
    run_id text not null,
    name text not null,
    queue text not null,
    tenant_id text,
    idempotency_key text not null,
    payload text not null,
    state text not null default 'ready'
        check (state in ('ready', 'running', 'waiting', 'completed', 'failed', 'dead', 'cancelled')),
    priority integer not null default 0,
    run_at_ms integer not null,
    attempt integer not null default 0,
    max_attempts integer not null,
    dead_letter integer not null default 1,
    claims integer not null default 0,
    claimed_by text,
    lease_until_ms integer,
    created_at_ms integer not null,
    updated_at_ms integer not null,
    finished_at_ms integer,
    last_error text,
    progress real,
    enqueued_by text,
    traceparent text,
    result text,
    throttle_until_ms integer
);

-- The idempotency namespace among live rows. The enqueue conflict and the live-row lookups spell
-- this same expression and this same state list, so the planner matches the partial index.
create unique index if not exists jobs_live_namespace
    on jobs (name, coalesce(tenant_id, ''), idempotency_key)
    where state in ('ready', 'running', 'waiting');

-- The claim of due rows: a partial index in claim order, per queue.
create index if not exists jobs_claimable
    on jobs (queue, priority, run_at_ms, id)
    where state in ('ready', 'waiting');

-- The rescue of lapsed leases and the burial of exhausted ones.
create index if not exists jobs_leased
    on jobs (queue, lease_until_ms)
    where state = 'running';

-- A throttled enqueue's lookup of the open window of its namespace.
create index if not exists jobs_throttled
    on jobs (name, coalesce(tenant_id, ''), idempotency_key, throttle_until_ms)
    where throttle_until_ms is not null;

-- Each attempt error a settle stored, keyed by the claim count (one error per claim), at most
-- 25 a job (MAX_ERROR_HISTORY).
create table if not exists attempt_errors (
    job_id text not null,
    claims integer not null,
    attempt integer not null,
    worker_id text,
    at_ms integer not null,
    error text not null,
    primary key (job_id, claims)
) without rowid;

-- How many runs of a job name ended with an outcome in a bucket of a tier. One writer at a
-- time holds the file, so a bucket is one row (no shards).
create table if not exists counters (
    tier text not null check (tier in ('minute', 'hour', 'day')),
    bucket_ms integer not null,
    name text not null,
    outcome text not null,
    count integer not null,
    primary key (tier, bucket_ms, name, outcome)
) without rowid;

-- Pauses the claim reads (not exists): a whole queue, or one job name in every queue.
create table if not exists pauses (
    kind text not null check (kind in ('queue', 'job')),
    name text not null,
    paused_at_ms integer not null,
    primary key (kind, name)
) without rowid;

-- Worker presence, refreshed by the claim of a registered worker. queues is a JSON array.
create table if not exists workers (
    id text primary key,
    host text not null,
    pid integer not null,
    queues text not null,
    started_at_ms integer not null,
    last_seen_ms integer not null,
    expires_at_ms integer not null
);

-- Durable steps: one row per step of a run. A done row is never overwritten (the upsert of
-- step_put is fenced on it), so a memoized result survives every replay.
create table if not exists steps (
    run_id text not null,
    name text not null,
    status text not null check (status in ('done', 'error', 'pending')),
    result text,
    error text,
    position integer not null,
    created_at_ms integer not null,
    primary key (run_id, name)
) without rowid;

-- The minute buckets folded into their hour and day, each at most once.
create table if not exists counter_folds (
    bucket_ms integer primary key,
    folded_at_ms integer not null
);

-- The operator index: a list page newest first, a bulk verb oldest first and the bounded
-- counts of a queue, each read one queue and one state at a time (the known queues are found
-- by a loose scan of its first column).
create index if not exists jobs_listed
    on jobs (queue, state, created_at_ms, id);

-- Fleet concurrency slots: one row per held slot, owned by a job id under one claim, reclaimed
-- when its TTL lapses.
create table if not exists slots (
    key text not null,
    job_id text not null,
    claims integer not null,
    expires_at_ms integer not null,
    primary key (key, job_id, claims)
) without rowid;

-- The scheduler. A task watermark is the fence every fire moves, by compare-and-set from the
-- value the scheduler read: every occurrence at or before it is done with.
create table if not exists task_watermarks (
    task text primary key,
    watermark_ms integer not null
) without rowid;

-- The last occurrence of each task that dispatched a job.
create table if not exists task_fires (
    task text primary key,
    occurrence_ms integer not null,
    job_id text not null,
    fired_at_ms integer not null
) without rowid;

create table if not exists task_pauses (
    task text primary key,
    paused_at_ms integer not null
) without rowid;

-- Leadership: one lease row per name, renewed by its holder, taken over once it lapsed.
create table if not exists leaders (
    name text primary key,
    holder text not null,
    expires_at_ms integer not null
) without rowid;

-- Sent events, kept for waits that begin before them until the purge, by tenant (null: the
-- untenanted scope). The index serves the lookup of a name's events of a tenant since an instant,
-- in (sent_at, id) order.
create table if not exists events (
    id text primary key,
    tenant text,
    name text not null,
    payload text not null,
    sent_at_ms integer not null
);

create index if not exists events_by_name on events (name, tenant, sent_at_ms, id);

create index if not exists events_sent on events (sent_at_ms);

-- A parked run registered for one event: at most one wait per job, replaced by its next wait.
create table if not exists event_waits (
    job_id text primary key,
    run_id text not null,
    queue text not null,
    step text not null,
    event text not null,
    tenant text,
    match text not null,
    since_ms integer not null,
    deadline_ms integer
);

create index if not exists event_waits_by_event on event_waits (event, tenant);

create index if not exists event_waits_deadline on event_waits (deadline_ms)
    where deadline_ms is not null;

-- The purge of finished jobs, oldest finish first in each finished state.
create index if not exists jobs_purgeable on jobs (state, finished_at_ms, id)
    where state in ('completed', 'failed', 'dead', 'cancelled');

-- The backfill ledger: one row per run of a sweep. Only a completed row blocks a rerun.
create table if not exists backfills (
    run_id text primary key,
    job_id text not null,
    name text not null,
    checksum text not null,
    environment text not null,
    tenant text,
    status text not null check (status in ('running', 'completed', 'failed')),
    cursor text,
    count integer not null default 0,
    batches integer not null default 0,
    error text,
    started_at_ms integer not null,
    updated_at_ms integer not null,
    finished_at_ms integer
);

create index if not exists backfills_started on backfills (name, started_at_ms desc);

create index if not exists backfills_completed
    on backfills (name, checksum, environment, tenant, finished_at_ms)
    where status = 'completed';

-- The webhook ledger: each endpoint's failure run and disablement, and its newest attempts in
-- record order (seq).
create table if not exists webhook_endpoints (
    endpoint text primary key,
    failures integer not null,
    disabled_at_ms integer
) without rowid;

create table if not exists webhook_attempts (
    seq integer primary key,
    endpoint text not null,
    message_id text not null,
    job_id text not null,
    attempt integer not null,
    status text not null,
    http_status integer,
    latency_ms integer not null,
    excerpt text not null,
    error text,
    at_ms integer not null
);

create index if not exists webhook_attempts_by_endpoint on webhook_attempts (endpoint, seq);

-- The transactional outbox: rows staged on the caller's own connection inside its transaction,
-- leased by relays (claimed_by, claim_until_ms) and marked published.
create table if not exists outbox (
    id text primary key,
    run_id text not null,
    name text not null,
    queue text not null,
    tenant_id text,
    idempotency_key text not null,
    payload text not null,
    priority integer not null,
    run_at_ms integer,
    max_attempts integer not null,
    dead_letter integer not null,
    enqueued_by text,
    traceparent text,
    staged_at_ms integer not null,
    claimed_by text,
    claim_until_ms integer,
    published_at_ms integer
);

create index if not exists outbox_unpublished on outbox (staged_at_ms, id)
    where published_at_ms is null;

create index if not exists outbox_published on outbox (published_at_ms)
    where published_at_ms is not null;

-- Fleet rate limits: one GCRA bucket per key, its theoretical arrival time in epoch ms (a row
-- whose time has passed is an idle, full bucket), and its deferral line, the instant the next
-- run refused by the full bucket is due.
create table if not exists rates (
    key text primary key,
    tat_ms real not null,
    line_ms real not null default 0
) without rowid;
