"""The claim is a partial-index scan at 1,000,000 rows: index regressions ship silently otherwise.

One bulk statement loads a realistic table (most rows finished, a large share delayed, a few
hundred due in one queue), the table is analyzed, and the driver's real claim statement is
explained with the parameters a worker sends; a claim of a queue with none due reads a few pages
of its delayed jobs, not all of them. The enqueue's statements keep one generic plan that reads no
row of jobs. Nothing is timed.

The operator's statements are explained over the same table, each run (a bulk verb inside a
transaction rolled back) so the plan carries the buffers it touched: a list page, a filtered
page, a page deep in the keyset, the queue counts and every bulk verb read `jobs` by index only,
sort no more than what those scans bounded, and touch a small fraction of the table's pages.
"""

from __future__ import annotations

import json
import secrets
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

import asyncpg
import pytest
import pytest_asyncio

from xjobs.contract.driver import (
    FINISHED_STATES,
    JOB_STATES,
    LAPSED_ON_FINAL_ATTEMPT,
    ClaimOptions,
)
from xjobs.contract.introspection import COUNT_CAP, JobFilter, JobPosition
from xjobs_pg.backend import asyncpg_dsn, open_backend
from xjobs_pg.operator_params import (
    BulkParams,
    CancelManyParams,
    ListParams,
    QueueCountsParams,
    WakingBulkParams,
)
from xjobs_pg.params import ClaimParams, Params
from xjobs_pg.schema import quote_schema
from xjobs_pg.servers import ServerUnavailable, postgres_url, unavailable
from xjobs_pg.sql import Statements

pytestmark = pytest.mark.asyncio(loop_scope="module")

ROWS = 1_000_000
DUE = 300  # ready and due, all in the claimed queue
HOUR_MS = 3_600_000
DAY_MS = 86_400_000

# Row i: i <= DUE is ready and due in `default`; every 50th (from 51) is running under a live
# lease; every 4th is ready an hour or more in the future (delayed); the rest completed a day ago.
# Ids are increasing, as a time-ordered id would be, which keeps the load to seconds.
LOAD = """
insert into {schema}.jobs (id, run_id, name, queue, tenant_id, idempotency_key, payload, state,
                           priority, run_at_ms, attempt, max_attempts, claims, claimed_by,
                           lease_until_ms, created_at_ms, updated_at_ms, finished_at_ms)
select ('00000000-0000-4000-8000-' || lpad(to_hex(g.i), 12, '0'))::uuid,
       ('00000000-0000-4000-9000-' || lpad(to_hex(g.i), 12, '0'))::uuid,
       'job_' || (g.i % 7),
       case when g.i <= {due} then 'default'
            else (array['default', 'emails', 'reports'])[1 + g.i % 3] end,
       null,
       'key-' || lpad(g.i::text, 7, '0'),
       '{{}}'::jsonb,
       k.state,
       0,
       case when g.i <= {due} then $1::bigint - 1000 - g.i
            when k.state = 'ready' then $1::bigint + {hour} + g.i
            else $1::bigint - {day} + g.i end,
       case when k.state in ('completed', 'running') then 1 else 0 end,
       3,
       case when k.state in ('completed', 'running') then 1 else 0 end,
       case when k.state = 'running' then 'worker-elsewhere' end,
       case when k.state = 'running' then $1::bigint + 60000 end,
       $1::bigint - {day} + g.i,
       $1::bigint - {day} + g.i,
       case when k.state = 'completed' then $1::bigint - {day} + g.i + 50 end
from generate_series(1, {rows}) as g(i)
cross join lateral (
    select case when g.i <= {due} then 'ready'
                when g.i % 1000 = 7 then 'dead'
                when g.i % 50 = 1 then 'running'
                when g.i % 4 = 0 then 'ready'
                else 'completed' end as state
) k
"""

MIX = """
select count(*) as total,
       count(*) filter (where state = 'completed') as completed,
       count(*) filter (where state = 'ready' and run_at_ms > $1) as delayed,
       count(*) filter (where state = 'ready' and run_at_ms <= $1) as due,
       count(distinct queue) filter (where state = 'ready' and run_at_ms <= $1) as due_queues
from {schema}.jobs
"""


@dataclass(frozen=True, slots=True)
class ExplainedClaim:
    plan: dict[str, Any]
    text: str
    mix: dict[str, int]
    generic_plans: int


@dataclass(frozen=True, slots=True)
class LoadedTable:
    """The loaded, analyzed table: a connection to it, its schema and the instant it was loaded at."""

    conn: asyncpg.Connection
    quoted: str
    now_ms: int
    mix: dict[str, int]


def server_url() -> str:
    try:
        return postgres_url()
    except ServerUnavailable as exc:
        unavailable(str(exc))


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def loaded() -> AsyncIterator[LoadedTable]:
    """A million rows in a schema of their own (dropped after), loaded once for the module."""
    url = server_url()
    schema = f"xjobs_t_{secrets.token_hex(6)}"
    quoted = quote_schema(schema)
    backend = await open_backend(url, schema=schema, max_size=1)
    await backend.close()
    conn = await asyncpg.connect(asyncpg_dsn(url)[0])
    try:
        now_ms = int(time.time() * 1000)
        load = LOAD.format(schema=quoted, due=DUE, hour=HOUR_MS, day=DAY_MS, rows=ROWS)
        await conn.execute(load, now_ms)
        await conn.execute(f"vacuum analyze {quoted}.jobs")
        mix = dict(await conn.fetchrow(MIX.format(schema=quoted), now_ms) or {})
        yield LoadedTable(conn=conn, quoted=quoted, now_ms=now_ms, mix=mix)
    finally:
        try:
            await conn.execute(f"drop schema if exists {quoted} cascade")
        finally:
            await conn.close()


CLAIM_TYPES = "bigint, text[], int[], text, bigint, bigint, bigint, text"


def literal(value: object) -> str:
    """A claim argument as an SQL literal (null, a number, plain text, or an array of them)."""
    if value is None:
        return "null"
    if isinstance(value, list):
        return "'{" + ",".join(map(str, value)) + "}'"
    if isinstance(value, int):
        return str(value)
    return "'" + str(value).replace("'", "''") + "'"


# A session plans a prepared statement afresh for its first five runs, then keeps the generic
# plan when it costs no more: the claim is explained at its seventh run, as a worker runs it.
RUNS_BEFORE_CACHED = 6


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def explained(loaded: LoadedTable) -> ExplainedClaim:
    """The claim's plan over the loaded table, the one the session caches for it."""
    conn, mix = loaded.conn, loaded.mix
    # What a worker polling two queues sends: the server clock ($1 null), ten a queue.
    claim = Statements(loaded.quoted)["claim"]
    args = (
        None,
        ["default", "emails"],
        [10, 10],
        str(uuid.uuid4()),
        20,
        30_000,
        60_000,
        LAPSED_ON_FINAL_ATTEMPT,
    )
    await conn.execute(f"prepare cached_claim({CLAIM_TYPES}) as {claim}")
    # `explain execute` takes no bound parameters: the values are written as literals.
    values = ", ".join(literal(a) for a in args)
    execute = f"execute cached_claim({values})"
    try:
        for _ in range(RUNS_BEFORE_CACHED):
            await conn.fetch(f"explain {execute}")
        plan = json.loads(await conn.fetchval(f"explain (format json) {execute}"))[0]
        text = "\n".join(row[0] for row in await conn.fetch(f"explain {execute}"))
        generic = await conn.fetchval(
            "select generic_plans from pg_prepared_statements where name = 'cached_claim'"
        )
    finally:
        await conn.execute("deallocate cached_claim")
    print(f"\nthe claim at {ROWS:,} rows ({mix}), generic plans {generic}:\n{text}")
    return ExplainedClaim(plan=plan["Plan"], text=text, mix=mix, generic_plans=generic)


def nodes(node: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield node
    for child in node.get("Plans", []):
        yield from nodes(child)


def cte(plan: dict[str, Any], name: str) -> dict[str, Any]:
    found = [n for n in nodes(plan) if n.get("Subplan Name") == f"CTE {name}"]
    assert len(found) == 1, f"the plan has no single CTE {name}"
    return found[0]


async def test_the_table_holds_a_million_rows_mostly_finished_or_delayed_few_due(
    explained: ExplainedClaim,
) -> None:
    mix = explained.mix
    assert (mix["total"], mix["due"], mix["due_queues"]) == (ROWS, DUE, 1)
    assert mix["completed"] > ROWS // 2
    assert mix["delayed"] > ROWS // 5


async def test_the_session_keeps_one_generic_plan_for_the_claim(
    explained: ExplainedClaim,
) -> None:
    assert explained.generic_plans > 0, explained.text


async def test_the_claim_of_due_jobs_scans_the_partial_index_jobs_claimable(
    explained: ExplainedClaim,
) -> None:
    scans = [
        n
        for n in nodes(cte(explained.plan, "due"))
        if n.get("Index Name") == "jobs_claimable"
        and n["Node Type"] in ("Index Scan", "Index Only Scan")
    ]
    assert scans, explained.text


async def test_the_index_gives_claim_order_without_a_sort(explained: ExplainedClaim) -> None:
    sorts = [n for n in nodes(cte(explained.plan, "due")) if n["Node Type"] == "Sort"]
    assert sorts == [], explained.text


async def test_the_claim_never_seq_scans_the_jobs_table(explained: ExplainedClaim) -> None:
    seq_scans = [
        n
        for n in nodes(explained.plan)
        if n["Node Type"] == "Seq Scan" and n.get("Relation Name") == "jobs"
    ]
    assert seq_scans == [], explained.text


# A claim reads its queue one priority at a time, so the first delayed job of a priority ends that
# scan: an index descent or two a priority, whatever the number of delayed jobs behind it.
IDLE_CLAIM_PAGES = 60


async def test_a_claim_of_a_queue_with_no_due_job_reads_none_of_its_delayed_jobs(
    loaded: LoadedTable,
) -> None:
    # `emails` holds some 83,000 delayed jobs and none due: a worker polling it idle claims nothing,
    # and each poll must not walk them (a scan in priority order with run_at as a filter read
    # every one of them, 25 ms a poll beside 500,000).
    delayed = await loaded.conn.fetchval(
        f"select count(*) from {loaded.quoted}.jobs "
        "where queue = 'emails' and state = 'ready' and run_at_ms > $1",
        loaded.now_ms,
    )
    assert delayed > 50_000
    options = ClaimOptions(str(uuid.uuid4()), {"emails": 10}, 30_000)
    params = ClaimParams(None, options, LAPSED_ON_FINAL_ATTEMPT)
    statement = Statements(loaded.quoted)["claim"]
    try:
        async with loaded.conn.transaction():
            await loaded.conn.execute("set local jit = off")
            found = await loaded.conn.fetchval(
                f"explain (analyze, buffers, format json) {statement}", *params.bind()
            )
            raise _RolledBack
    except _RolledBack:
        pass
    plan = json.loads(found)[0]["Plan"]
    scans = [
        n for n in nodes(plan) if n.get("Relation Name") == "jobs" and "Scan" in n["Node Type"]
    ]
    pages = sum(n["Shared Hit Blocks"] + n["Shared Read Blocks"] for n in scans)
    claimed = [n for n in scans if n.get("Index Name") == "jobs_claimable"]
    print(f"\nan idle claim beside {delayed:,} delayed jobs: {pages} pages of jobs read")
    assert claimed, plan
    assert plan["Actual Rows"] == 0, plan
    assert pages <= IDLE_CLAIM_PAGES, json.dumps(plan, indent=1)


# -- the enqueue's one statement ------------------------------------------------------------

# What `enqueue_one` and `enqueue_fresh` take: the columns of a job (one value each, or an array
# each), now, the queues to wake, the channel.
JOB_TYPES = "uuid, uuid, text, text, text, text, text, int, bigint, int, bool, text, text"
FRESH_TYPES = {
    "enqueue_one": f"{JOB_TYPES}, bigint, text[], text",
    "enqueue_fresh": ", ".join(f"{t}[]" for t in JOB_TYPES.split(", ")) + ", bigint, text[], text",
}


def fresh_job(name: str) -> list[object]:
    """A new job's columns as `explain execute` literals: one value each, or a one-element array."""
    values = [
        f"'{uuid.uuid4()}'",
        f"'{uuid.uuid4()}'",
        "'job_1'",
        "'default'",
        "null",
        f"'key-{secrets.token_hex(4)}'",
        """'{"n": 1}'""",
        "0",
        "null",
        "3",
        "true",
        "null",
        "null",
    ]
    if name == "enqueue_fresh":
        values = [f"array[{v}]::{t}[]" for v, t in zip(values, JOB_TYPES.split(", "), strict=True)]
    return [*values, "null", "'{default}'", "'xjobs_t_wake'"]


@pytest.mark.parametrize("name", sorted(FRESH_TYPES))
async def test_an_enqueue_keeps_one_generic_plan_that_reads_no_row_of_jobs(
    loaded: LoadedTable, name: str
) -> None:
    # The plan a session caches for the enqueue is made once and kept while the table grows: it
    # must read no row of jobs (a probe joined in would be planned for the table as it was then,
    # a hash of all of it once it was small), and the session must keep it (no plan per enqueue).
    conn = loaded.conn
    statement = Statements(loaded.quoted)[name]
    await conn.execute(f"prepare cached_enqueue({FRESH_TYPES[name]}) as {statement}")
    try:
        for _ in range(RUNS_BEFORE_CACHED):
            execute = f"execute cached_enqueue({', '.join(map(str, fresh_job(name)))})"
            plan = json.loads(await conn.fetchval(f"explain (format json) {execute}"))[0]["Plan"]
        text = "\n".join(row[0] for row in await conn.fetch(f"explain {execute}"))
        generic = await conn.fetchval(
            "select generic_plans from pg_prepared_statements where name = 'cached_enqueue'"
        )
    finally:
        await conn.execute("deallocate cached_enqueue")
    print(f"\n{name} at {ROWS:,} rows, generic plans {generic}:\n{text}")
    assert generic > 0, text
    reads = [
        n
        for n in nodes(plan)
        if n.get("Relation Name") == "jobs" and n["Node Type"] != "ModifyTable"
    ]
    assert reads == [], text


# -- the operator's statements ----------------------------------------------------------------

PAGE = 51  # what `Operator.list_jobs` asks for a default page: 50, and one to know there is more
BATCH = 1000
QUEUES = 3  # the loaded table's queues: each statement reads one queue and one state at a time


class _RolledBack(Exception):
    """Raised inside the transaction of an explained statement, so what it moved is undone."""


@dataclass(frozen=True, slots=True)
class Explained:
    plan: dict[str, Any]
    text: str

    @property
    def scans(self) -> list[dict[str, Any]]:
        """Every node that reads the jobs table."""
        return [
            n
            for n in nodes(self.plan)
            if n.get("Relation Name") == "jobs" and n["Node Type"] != "ModifyTable"
        ]

    @property
    def rows_read(self) -> int:
        """The rows every scan of jobs produced or filtered out, over all its loops."""
        return sum(
            (n["Actual Rows"] + n.get("Rows Removed by Filter", 0)) * n["Actual Loops"]
            for n in self.scans
        )


async def explain_run(
    loaded: LoadedTable, name: str, params: Params, *, by_index: bool = False
) -> Explained:
    """One named statement run (and rolled back) on the loaded table, with its plan and row
    counts; `by_index` runs it as `Executor.fetch_by_index` does, after `index_scans_only`."""
    conn, statements = loaded.conn, Statements(loaded.quoted)
    found: list[Any] = []
    for analyze in ("(analyze, buffers, format json)", "(analyze, costs off, summary off)"):
        try:
            async with conn.transaction():
                if by_index:
                    await conn.execute(statements["index_scans_only"])
                found.append(
                    await conn.fetch(f"explain {analyze} {statements[name]}", *params.bind())
                )
                raise _RolledBack
        except _RolledBack:
            pass
    found[0] = found[0][0][0]
    explained = Explained(json.loads(found[0])[0]["Plan"], "\n".join(r[0] for r in found[1]))
    print(f"\n{name}: {explained.rows_read:,} rows read of {ROWS:,}\n{explained.text}")
    return explained


def unbounded_sorts(node: dict[str, Any], under_sort: bool = False) -> list[dict[str, Any]]:
    """Scans of jobs under a Sort with no Limit between them: a sort of the table. A probe of
    jobs_pkey is not one: it reads one row a key of a bounded input (the cascade of a cancel sorts
    the rows it locks, found by key, into its lock order), which `rows_read` bounds."""
    found: list[dict[str, Any]] = []
    if node["Node Type"] == "Limit":
        under_sort = False
    by_key = node.get("Index Name") == "jobs_pkey"
    if under_sort and node.get("Relation Name") == "jobs" and not by_key:
        found.append(node)
    if node["Node Type"] in ("Sort", "Incremental Sort"):
        under_sort = True
    for child in node.get("Plans", []):
        found += unbounded_sorts(child, under_sort)
    return found


def assert_bounded(explained: Explained, indexes: set[str], most_rows: int) -> None:
    """Every read of jobs is an index scan of `indexes` (no seq scan, no bitmap that reads a whole
    range before a limit), no sort reads the table, and at most `most_rows` rows are read."""
    kinds = {n["Node Type"] for n in explained.scans}
    assert kinds, explained.text
    assert kinds <= {"Index Scan", "Index Only Scan"}, explained.text
    assert {n["Index Name"] for n in explained.scans} <= indexes, explained.text
    assert unbounded_sorts(explained.plan) == [], explained.text
    assert explained.rows_read <= most_rows, explained.text


def page(where: JobFilter, after: JobPosition | None = None) -> ListParams:
    return ListParams(where, where.states or JOB_STATES, after, PAGE)


@pytest.mark.parametrize(
    "where",
    [
        JobFilter(),
        JobFilter(states=("dead",)),
        JobFilter(states=("running", "completed")),
        JobFilter(queue="emails"),
        JobFilter(queue="reports", states=("ready",), name="job_3"),
    ],
    ids=["first-page", "dead", "running-or-completed", "queue", "queue-ready-name"],
)
async def test_a_list_page_reads_jobs_listed_and_sorts_only_its_page(
    loaded: LoadedTable, where: JobFilter
) -> None:
    explained = await explain_run(loaded, "list_jobs", page(where))
    states = len(where.states or JOB_STATES)
    # Each queue and state reads at most a page, in index order; a name filter reads a few more.
    assert_bounded(explained, {"jobs_listed"}, QUEUES * states * PAGE * 10)


async def test_a_page_deep_in_the_keyset_reads_what_the_first_page_reads(
    loaded: LoadedTable,
) -> None:
    middle = await loaded.conn.fetchrow(
        f"select created_at_ms, id from {loaded.quoted}.jobs order by created_at_ms, id "
        f"offset {ROWS // 2} limit 1"
    )
    assert middle is not None
    after = JobPosition(middle["created_at_ms"], str(middle["id"]))
    deep = await explain_run(loaded, "list_jobs", page(JobFilter(), after))
    first = await explain_run(loaded, "list_jobs", page(JobFilter()))
    assert_bounded(deep, {"jobs_listed"}, QUEUES * len(JOB_STATES) * PAGE)
    assert deep.rows_read <= first.rows_read, deep.text


async def test_the_queue_counts_read_indexes_and_stop_at_the_cap(loaded: LoadedTable) -> None:
    params = QueueCountsParams(loaded.now_ms, COUNT_CAP)
    explained = await explain_run(loaded, "queue_counts", params, by_index=True)
    # Six capped counts a queue at most, whatever the table holds: its 700,000 completed rows are
    # never read, nor its 250,000 delayed ones past the cap.
    indexes = {"jobs_listed", "jobs_claimable", "jobs_leased"}
    assert_bounded(explained, indexes, QUEUES * 6 * COUNT_CAP)


async def test_the_scheduled_count_reads_no_heap_row_of_the_delayed_ones(
    loaded: LoadedTable,
) -> None:
    params = QueueCountsParams(loaded.now_ms, COUNT_CAP)
    explained = await explain_run(loaded, "queue_counts", params, by_index=True)
    # Each queue counts its ready rows by jobs_listed alone, up to its due count plus the cap:
    # the 250,000 delayed rows cost at most the cap of index entries a queue, no heap fetch.
    ready_scans = [
        n
        for n in explained.scans
        if n["Node Type"] == "Index Only Scan"
        and n["Index Name"] == "jobs_listed"
        and "'ready'" in n.get("Index Cond", "")
    ]
    assert len(ready_scans) == 1, explained.text
    (scan,) = ready_scans
    assert scan["Heap Fetches"] == 0, explained.text
    assert scan["Actual Rows"] * scan["Actual Loops"] <= QUEUES * (DUE + COUNT_CAP), explained.text
    # The heap is read only for the due rows (the ready count): never for a delayed row.
    heap_scans = [n for n in explained.scans if n["Node Type"] == "Index Scan"]
    heap_rows = sum(
        (n["Actual Rows"] + n.get("Rows Removed by Filter", 0)) * n["Actual Loops"]
        for n in heap_scans
    )
    assert heap_rows <= QUEUES * 2 * DUE + QUEUES * 6, explained.text


def bulk(where: JobFilter, states: tuple[str, ...]) -> BulkParams:
    return BulkParams(where, states, None, BATCH, COUNT_CAP)


FINISHED = tuple(sorted(FINISHED_STATES))
BULK_VERBS: dict[str, Params] = {
    "retry_many": WakingBulkParams(bulk(JobFilter(), FINISHED), "xjobs_t_wake"),
    "remove_many": bulk(JobFilter(states=("dead",)), ("dead",)),
    "cancel_many": CancelManyParams(bulk(JobFilter(queue="reports"), ("running",)), "cancelled"),
    "promote_many": WakingBulkParams(bulk(JobFilter(queue="emails"), ("ready",)), "xjobs_t_wake"),
}


@pytest.mark.parametrize("name", sorted(BULK_VERBS))
async def test_a_bulk_verb_reads_its_batch_and_the_cap_by_index(
    loaded: LoadedTable, name: str
) -> None:
    explained = await explain_run(loaded, name, BULK_VERBS[name], by_index=True)
    # The batch (twice over for retry_many, per queue and state), the count up to the cap, and
    # the batch again when it is moved by key.
    most = QUEUES * len(FINISHED) * 2 * BATCH + (BATCH + COUNT_CAP) + BATCH
    indexes = {"jobs_listed", "jobs_pkey", "jobs_live_namespace"}
    if name == "cancel_many":
        # The cascade: the children of the batch by jobs_children (none here), and the batch
        # locked by key before it is moved.
        most, indexes = most + BATCH, indexes | {"jobs_children"}
    assert_bounded(explained, indexes, most)
