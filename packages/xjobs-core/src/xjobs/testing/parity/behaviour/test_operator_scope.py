"""Parity: `app.operator.for_tenant(t)` sees and moves only tenant t's jobs; to it another tenant's
job does not exist (`XJOBS_JOB_NOT_FOUND`, nothing changed), shared things are read-only (issue 40)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import pytest

from xjobs.app import App
from xjobs.contract.backfills import BackfillStart
from xjobs.contract.driver import BulkResult, JobRecord, JobState
from xjobs.contract.introspection import MAX_JOB_PAGE, JobFilter
from xjobs.contract.stores import WorkerInfo
from xjobs.errors import JobNotFoundError, TenantScopeInvalidError, TenantScopeSharedError
from xjobs.ids import new_id
from xjobs.operate.operator import Operator
from xjobs.testing.parity.env import ParityEnv

pytestmark = [pytest.mark.xjobs_parity, pytest.mark.requires("introspection")]

OURS, THEIRS = "acme", "globex"
HOUR_MS = 3_600_000
BUILT: tuple[JobState, ...] = ("dead", "completed", "ready")
# The state each verb moves a job from (get reads any)
STATE_OF = {
    "get": "dead",
    "cancel": "ready",
    "retry": "dead",
    "promote": "delayed",
    "remove": "completed",
}

# How many of the tenant's four jobs each bulk verb moves: the live two, the finished two, the delayed one
BULK_MOVES = {"cancel": 2, "retry": 2, "remove": 2, "promote": 1}


@dataclass(frozen=True)
class Tenancy:
    """Each tenant's job in each state a verb moves: `ids[tenant][state]`."""

    ids: dict[str, dict[str, str]]

    def every(self, tenant: str) -> set[str]:
        """Every job id of `tenant`."""
        return set(self.ids[tenant].values())


async def two_tenants(parity: ParityEnv) -> Tenancy:
    """A dead, a completed, a due and a delayed job for each tenant, each in its own queue (a job
    that must be claimed to reach its state is built while its queue holds nothing else)."""
    ids: dict[str, dict[str, str]] = {OURS: {}, THEIRS: {}}
    for tenant in (OURS, THEIRS):
        for state in BUILT:
            job = await parity.job_in_state(state, tenant_id=tenant, queue=f"scope-{state}")
            ids[tenant][state] = job.id
        later = parity.clock.now_ms() + HOUR_MS
        delayed = await parity.enqueue(tenant_id=tenant, queue="scope-delayed", run_at_ms=later)
        ids[tenant]["delayed"] = delayed.id
    return Tenancy(ids)


async def _verb(op: Operator, verb: str, job_id: str) -> object:
    calls: dict[str, Callable[[str], Awaitable[object]]] = {
        "get": op.get_job,
        "cancel": op.cancel,
        "retry": op.retry,
        "promote": op.promote,
        "remove": op.remove,
    }
    return await calls[verb](job_id)


async def _records(app: App, ids: set[str]) -> dict[str, JobRecord | None]:
    return {job_id: await app.backend.jobs.get(job_id) for job_id in sorted(ids)}


class TestScopedReads:
    async def test_a_scoped_operator_lists_only_its_tenants_jobs(self, parity: ParityEnv) -> None:
        """Rule: a scoped list holds exactly the tenant's jobs, whatever tenant the filter names."""
        tenancy = await two_tenants(parity)
        async with parity.app() as app:
            scoped = app.operator.for_tenant(OURS)
            listed = {j.id for j in (await scoped.list_jobs(limit=MAX_JOB_PAGE)).jobs}
            widened = await scoped.list_jobs(JobFilter(tenant=THEIRS), limit=MAX_JOB_PAGE)
        assert (listed, widened.jobs) == (tenancy.every(OURS), ())

    async def test_a_scoped_page_cursor_pages_within_the_tenant(self, parity: ParityEnv) -> None:
        """Rule: keyset pages of a scoped list visit each of the tenant's jobs once, no other."""
        tenancy = await two_tenants(parity)
        async with parity.app() as app:
            scoped = app.operator.for_tenant(OURS)
            seen: list[str] = []
            cursor = None
            while True:
                page = await scoped.list_jobs(limit=1, after=cursor)
                seen += [j.id for j in page.jobs]
                cursor = page.cursor
                if cursor is None:
                    break
        assert sorted(seen) == sorted(tenancy.every(OURS))

    async def test_scoped_queue_counts_count_only_its_tenants_jobs(self, parity: ParityEnv) -> None:
        """Rule: a scoped operator's queue counts are the tenant's jobs alone."""
        await two_tenants(parity)
        await parity.enqueue(tenant_id=THEIRS, queue="scope-theirs-only")
        async with parity.app() as app:
            counts = {q.queue: q for q in await app.operator.for_tenant(OURS).queues()}
        # a queue where the tenant has no counted job (completed is not counted) is not listed
        assert sorted(counts) == ["scope-dead", "scope-delayed", "scope-ready"]
        assert (counts["scope-dead"].dead, counts["scope-ready"].ready) == (1, 1)
        assert (counts["scope-delayed"].scheduled, counts["scope-delayed"].ready) == (1, 0)

    async def test_workers_show_only_the_tenants_running_jobs(self, parity: ParityEnv) -> None:
        """Rule: the worker rows are shared; the jobs each runs are narrowed to the tenant."""
        parity.backend.require("workers")
        ours = await parity.job_in_state("running", tenant_id=OURS, queue="scope-run-a")
        await parity.job_in_state("running", tenant_id=THEIRS, queue="scope-run-b")
        now = parity.clock.now_ms()
        info = WorkerInfo("worker-a", "host", 1, ("scope-run-a", "scope-run-b"), now, now)
        await parity.workers.announce(info, 60_000)
        async with parity.app() as app:
            (row,) = await app.operator.for_tenant(OURS).workers()
        assert row.running == (ours.id,)


class TestScopedMoves:
    @pytest.mark.parametrize("verb", sorted(STATE_OF))
    async def test_a_verb_on_another_tenants_job_is_not_found_and_changes_nothing(
        self, parity: ParityEnv, verb: str
    ) -> None:
        """Rule: to a scoped operator another tenant's job does not exist, for every verb."""
        tenancy = await two_tenants(parity)
        theirs = tenancy.ids[THEIRS][STATE_OF[verb]]
        async with parity.app() as app:
            before = await _records(app, tenancy.every(THEIRS))
            with pytest.raises(JobNotFoundError):
                await _verb(app.operator.for_tenant(OURS), verb, theirs)
            assert await _records(app, tenancy.every(THEIRS)) == before

    @pytest.mark.parametrize("verb", sorted(STATE_OF))
    async def test_a_verb_on_its_own_tenants_job_acts(self, parity: ParityEnv, verb: str) -> None:
        """Rule: the same verb on the tenant's own job in the same state is done."""
        tenancy = await two_tenants(parity)
        async with parity.app() as app:
            answer = await _verb(
                app.operator.for_tenant(OURS), verb, tenancy.ids[OURS][STATE_OF[verb]]
            )
        assert answer is not None

    @pytest.mark.parametrize("verb", ["cancel", "retry", "promote", "remove"])
    async def test_a_bulk_move_moves_only_its_tenants_jobs(
        self, parity: ParityEnv, verb: str
    ) -> None:
        """Rule: a scoped bulk move is narrowed to the tenant; naming another tenant moves none."""
        tenancy = await two_tenants(parity)
        async with parity.app() as app:
            scoped = app.operator.for_tenant(OURS)
            bulk = {
                "cancel": scoped.cancel_where,
                "retry": scoped.retry_where,
                "promote": scoped.promote_where,
                "remove": scoped.remove_where,
            }[verb]
            before = await _records(app, tenancy.every(THEIRS))
            foreign = await bulk(JobFilter(tenant=THEIRS))
            moved = await bulk(JobFilter())
            assert await _records(app, tenancy.every(THEIRS)) == before
        assert (foreign, moved) == (BulkResult(0, 0), BulkResult(BULK_MOVES[verb], 0))


class TestScopeAndShared:
    @pytest.mark.parametrize("tenant", [None, "", "a\x00b", "x" * 201, 7])
    async def test_no_tenant_is_never_every_tenant(self, parity: ParityEnv, tenant: object) -> None:
        """Rule: a missing, empty or malformed tenant is refused, never read as unscoped."""
        async with parity.app() as app:
            with pytest.raises(TenantScopeInvalidError):
                app.operator.for_tenant(tenant)  # type: ignore[arg-type]

    async def test_a_scope_is_never_switched(self, parity: ParityEnv) -> None:
        """Rule: a scoped operator answers itself for its own tenant and refuses another."""
        async with parity.app() as app:
            scoped = app.operator.for_tenant(OURS)
            assert scoped.for_tenant(OURS) is scoped
            assert (app.operator.tenant, scoped.tenant) == (None, OURS)
            with pytest.raises(TenantScopeInvalidError):
                scoped.for_tenant(THEIRS)

    async def test_what_every_tenant_shares_is_read_not_steered(self, parity: ParityEnv) -> None:
        """Rule: pauses are read by a scoped operator, never written; the counters (every
        tenant's totals) are refused."""
        async with parity.app() as app:
            await app.operator.pause("queue", "scope-shared")
            scoped = app.operator.for_tenant(OURS)
            assert [p.name for p in await scoped.pauses()] == ["scope-shared"]
            for refused in (
                scoped.pause("queue", "scope-other"),
                scoped.resume("queue", "scope-shared"),
                scoped.pause("job", "some_job"),
                scoped.counters(),
            ):
                with pytest.raises(TenantScopeSharedError):
                    await refused
            assert [p.name for p in await app.operator.pauses()] == ["scope-shared"]


@pytest.mark.requires("backfills")
class TestScopedBackfills:
    async def test_a_scoped_operator_reads_only_its_tenants_sweeps(self, parity: ParityEnv) -> None:
        """Rule: a scoped operator reads the ledger runs of its own tenant's sweeps; another
        tenant's, and a cross-tenant sweep's (`tenant="none"`), do not exist to it."""
        ledger = parity.backend.backfills
        assert ledger is not None
        runs = {}
        for tenant in (OURS, THEIRS, None):
            run_id = new_id()
            runs[tenant] = run_id
            await ledger.begin(BackfillStart(run_id, new_id(), "sweep", "c1", "test", tenant))
        async with parity.app() as app:
            everyone = {row.run_id for row in await app.operator.backfills("sweep")}
            ours = [row.run_id for row in await app.operator.for_tenant(OURS).backfills()]
        assert everyone == set(runs.values())
        assert ours == [runs[OURS]]
