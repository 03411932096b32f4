-- Child jobs (issue 44): a group of children spawned by a running parent, keyed by the parent run
-- and the step (child_groups), parked on by the parent, and resolved inside the transaction of the
-- terminal write that ends its last child (or its first failed one, when the group fails fast).

-- name: child_fence
-- The parent's claim still holds (every write of the store is fenced on it).
select 1 from jobs
where id = :job_id and state = 'running' and claimed_by = :worker_id and claims = :claims;

-- name: child_group_put
-- The group, written by its first page; a later page keeps it as it is.
insert into child_groups (parent_run_id, step, parent_id, total, wait, fail_fast, detached,
                          created_at_ms)
values (:parent_run_id, :step, :parent_id, :total, :wait, :fail_fast, :detached, :now)
on conflict (parent_run_id, step) do nothing;

-- name: child_link
-- The link of the page's new rows (:rows a JSON array of [job id, index]); a row that existed
-- already (a replayed page) keeps the link it has.
update jobs
set parent_id = :parent_id, parent_run_id = :parent_run_id, child_step = :step,
    child_index = link.child_index, detached = :detached, child_counted = 0
from (
    select json_extract(value, '$[0]') as job_id, json_extract(value, '$[1]') as child_index
    from json_each(:rows)
) as link
where jobs.id = link.job_id and jobs.parent_run_id is null;

-- name: child_spawned
update child_groups set spawned = max(spawned, :spawned)
where parent_run_id = :parent_run_id and step = :step
returning spawned;

-- name: child_group
select total, spawned, ended, failed, first_failed, resolved, wait, fail_fast, parked, parent_id
from child_groups
where parent_run_id = :parent_run_id and step = :step;

-- name: child_park
-- The parent parks on its group; answers whether the group resolved already.
update child_groups set parked = 1
where parent_run_id = :parent_run_id and step = :step
returning resolved;

-- name: child_page
select child_index, id, state, result, last_error
from jobs
where parent_run_id = :parent_run_id and child_step = :step and child_index > :after_index
order by child_index
limit :limit;

-- name: child_endings
-- The first ending of each child among :ids (a JSON array of job ids) that is not counted yet:
-- marked counted, and answered with its group, index and state.
update jobs set child_counted = 1
where id in (select value from json_each(:ids)) and parent_run_id is not null
  and child_counted = 0
returning parent_run_id, child_step, child_index, state;

-- name: child_group_ended
-- One child's ending counted into its group (:failed 1 for an ending other than completed), the
-- group resolved when the rule says so (:resolved, decided from the row read in this transaction).
update child_groups
set ended = ended + 1, failed = failed + :failed,
    first_failed = case when :failed = 1 then coalesce(first_failed, :child_index)
                        else first_failed end,
    resolved = :resolved
where parent_run_id = :parent_run_id and step = :step;

-- name: child_wake_parent
-- The parked parent, under the run that spawned the group, due now; answers its queue.
update jobs set run_at_ms = :now, updated_at_ms = :now
where id = :parent_id and state = 'waiting' and run_id = :parent_run_id
returning queue;

-- name: child_descendants
-- The live descendants of :id that a cancel takes along: its children that are not detached,
-- and theirs, down every branch a detached child does not stop.
with recursive tree(id) as (
    select c.id from jobs c where c.parent_id = :id and c.detached = 0
    union
    select c.id from jobs c join tree t on c.parent_id = t.id where c.detached = 0
)
select j.id from jobs j
where j.id in (select id from tree) and j.state in ('ready', 'running', 'waiting');

-- name: child_group_live
-- The live children of a group (a fail-fast parent cancels them).
select id from jobs
where parent_run_id = :parent_run_id and child_step = :step
  and state in ('ready', 'running', 'waiting')
order by child_index;

-- name: child_family
-- A job's parent and its children counted by state (one row, state null, for a job with none).
select j.parent_id, c.state, count(c.id)
from jobs j
left join jobs c on c.parent_id = j.id
where j.id = :id
group by j.parent_id, c.state
order by c.state;
