-- Child jobs (issue 44), added to a file that lacks them (a new file too, after ddl.sql): install
-- runs this script once, in its BEGIN IMMEDIATE transaction, when jobs has no parent_id column.
-- A child row names the job that spawned it (parent_id), its group (the parent run and the step
-- that spawned it, the key of child_groups), its index in that group, whether it is detached (a
-- cancel of the parent does not reach it), and child_counted: 0 until its first ending is counted
-- into its group, 1 after (a requeued child that ends again moves nothing). The columns are
-- nullable with no default (a catalogue change, no rewrite) and the indexes partial: a job with no
-- parent adds no entry to them.
alter table jobs add column parent_id text;
alter table jobs add column parent_run_id text;
alter table jobs add column child_step text;
alter table jobs add column child_index integer;
alter table jobs add column detached integer;
alter table jobs add column child_counted integer;

-- A group in index order (a page of the parent's read).
create index if not exists jobs_child_groups
    on jobs (parent_run_id, child_step, child_index)
    where parent_run_id is not null;

-- The children of a job (the cascade of a cancel, the counts of a family).
create index if not exists jobs_child_parents
    on jobs (parent_id, state)
    where parent_id is not null;

-- A group of children, written by its first spawn page, moved by each child's first ending. One
-- writer at a time holds the file, so one counter row serves every ending (no shards: the ending
-- that resolves the group is the only one that sees it turn). parked: the parent parked on it.
create table if not exists child_groups (
    parent_run_id text not null,
    step text not null,
    parent_id text not null,
    total integer not null,
    spawned integer not null default 0,
    wait integer not null,
    fail_fast integer not null,
    detached integer not null,
    ended integer not null default 0,
    failed integer not null default 0,
    first_failed integer,
    resolved integer not null default 0,
    parked integer not null default 0,
    created_at_ms integer not null,
    primary key (parent_run_id, step)
) without rowid;
