"""Retention declared: the policy's refusals and cuts, `purge()`'s target rules, `@job(retention=)`, and the app's purge task."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

import pytest
from pydantic import BaseModel

import xjobs
from xjobs import App, JobContext, job
from xjobs.clock import ManualClock
from xjobs.contract.backend import Backend
from xjobs.contract.retention import (
    MAX_PURGE_BATCH,
    PURGE_STORES,
    PurgeCut,
    PurgeStore,
    Retention,
)
from xjobs.errors import (
    AppStateError,
    CapabilityMissingError,
    DeclarationInvalidError,
    OptionInvalidError,
)
from xjobs.factories.purge import CLOCK_STEP, PURGE_JOB, purge, purge_pass
from xjobs.factories.purge_target import StoreTarget

HOUR_MS = 3_600_000


class Item(BaseModel):
    n: int


class Target:
    """A purge target that records the instants it was asked to purge at."""

    def __init__(self, name: str) -> None:
        self._name = name
        self.asked: list[int] = []

    @property
    def name(self) -> str:
        return self._name

    async def purge_expired(self, now_ms: int) -> int:
        self.asked.append(now_ms)
        return 1

    async def count_expired(self, now_ms: int) -> int:
        return 0


class Batches:
    """A retention store that answers the given batch sizes in turn, recording each limit."""

    def __init__(self, answers: list[int]) -> None:
        self.answers = answers
        self.limits: list[int] = []

    def keep(self, policy: object) -> None:
        return None

    async def purge(self, store: PurgeStore, cut: PurgeCut, limit: int) -> int:
        self.limits.append(limit)
        return self.answers.pop(0)

    async def expired(self, store: PurgeStore, cut: PurgeCut) -> int:
        return sum(self.answers)


@pytest.mark.parametrize(
    "options",
    [
        {"completed": timedelta(0)},
        {"dead": timedelta(days=-1)},
        {"events": "a day"},
        {"counters_minute": timedelta(minutes=30)},
        {"batch": 0},
        {"batch": MAX_PURGE_BATCH + 1},
        {"pause": timedelta(seconds=-1)},
        {"duty": 0},
        {"duty": 1.5},
        {"duty": float("nan")},
    ],
)
def test_a_bad_policy_is_refused_naming_its_option(options: dict[str, Any]) -> None:
    with pytest.raises(OptionInvalidError) as refused:
        Retention(**options)
    assert refused.value.code == "XJOBS_OPTION_INVALID"
    assert "retention" in str(refused.value)


def test_the_cut_of_a_pass_is_one_instant_minus_each_keep() -> None:
    policy = Retention(completed=timedelta(hours=1), dead=timedelta(hours=2))
    cut = policy.cut(10 * HOUR_MS, {"audit": 5 * HOUR_MS})
    assert cut.jobs["completed"] == 9 * HOUR_MS
    assert cut.jobs["dead"] == 8 * HOUR_MS
    assert cut.job_cutoff("audit", "completed") == 5 * HOUR_MS
    assert cut.job_cutoff("other", "cancelled") == 10 * HOUR_MS - 24 * HOUR_MS
    assert cut.counters["minute"] == 10 * HOUR_MS - 48 * HOUR_MS
    assert cut.job_cutoff("other", "ready") is None  # a live state is never cut


def test_purge_refuses_duplicate_target_names_and_the_clock_steps_name() -> None:
    with pytest.raises(DeclarationInvalidError):
        purge([Target("jobs"), Target("jobs")])
    with pytest.raises(DeclarationInvalidError):
        purge([Target(CLOCK_STEP)])
    with pytest.raises(DeclarationInvalidError):
        purge([])
    with pytest.raises(DeclarationInvalidError):
        purge([object()])  # type: ignore[list-item]


def test_purge_builds_a_job_handle_with_a_constant_key() -> None:
    handle = purge([Target("a"), Target("b")], queue="maintenance")
    assert (handle.name, handle.queue) == (PURGE_JOB, "maintenance")
    assert handle.key_for(handle.input_model()) == "purge"


@pytest.mark.asyncio
async def test_a_store_target_batches_until_a_short_batch() -> None:
    store = Batches([3, 3, 1, 3])
    target = StoreTarget("jobs", lambda: store, lambda now: Retention().cut(now), batch=3)
    assert await target.purge_expired(0) == 7
    assert store.limits == [3, 3, 3]  # the short third batch ended the pass


class SlowBatches(Batches):
    """Batches that each take `took_s` on a fake monotonic clock, and the rests asked for after them."""

    def __init__(self, answers: list[int], took_s: float) -> None:
        super().__init__(answers)
        self.now = 0.0
        self.took_s = took_s
        self.rests: list[float] = []

    def monotonic(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.rests.append(round(seconds, 6))

    async def purge(self, store: PurgeStore, cut: PurgeCut, limit: int) -> int:
        self.now += self.took_s
        return await super().purge(store, cut, limit)


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("duty", "pause", "rest"),
    [
        (0.25, timedelta(0), 0.03),
        (0.5, timedelta(0), 0.01),
        (1.0, timedelta(milliseconds=5), 0.005),
    ],
)
async def test_a_store_target_rests_after_each_full_batch_by_its_duty_cycle(
    duty: float, pause: timedelta, rest: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch that took 10 ms is followed by 10 ms × (1 − duty) / duty of rest, at least the
    pause; the short last batch by none."""
    store = SlowBatches([3, 3, 1], took_s=0.01)
    monkeypatch.setattr("xjobs.factories.purge_target.monotonic", store.monotonic)
    monkeypatch.setattr("xjobs.factories.purge_target.sleep", store.sleep)
    target = StoreTarget(
        "jobs", lambda: store, lambda now: Retention().cut(now), batch=3, pause=pause, duty=duty
    )
    assert await target.purge_expired(0) == 7
    assert store.rests == [rest, rest]


def test_job_retention_is_validated_and_kept_on_the_handle() -> None:
    async def body(ctx: JobContext, item: Item) -> None:
        return None

    handle = job(
        body, tenant="none", idempotency_key=lambda i: str(i.n), retention=timedelta(days=90)
    )
    assert handle.retention_ms == 90 * 24 * HOUR_MS
    with pytest.raises(OptionInvalidError):
        job(body, tenant="none", idempotency_key=lambda i: str(i.n), retention=timedelta(0))


@pytest.mark.asyncio
async def test_an_app_without_retention_refuses_a_pass_but_runs_a_given_policy() -> None:
    async with App("memory://", clock=ManualClock(), retention=None) as app:
        with pytest.raises(AppStateError):
            await app.purge()
        report = await app.purge(Retention(), dry_run=True)
    assert list(report) == list(PURGE_STORES)
    assert PURGE_JOB not in app.jobs


@pytest.mark.asyncio
async def test_an_app_with_retention_refuses_a_backend_without_a_retention_store() -> None:
    backend = await xjobs.connect("memory://", clock=ManualClock())
    bare = Backend(name="bare", url="memory://", clock=backend.clock, jobs=backend.jobs)
    with pytest.raises(CapabilityMissingError):
        await App(bare, retention=Retention()).open()
    with pytest.raises(CapabilityMissingError, match="retention=None"):
        await App(bare).open()  # retention is on by default
    async with App(bare, retention=None) as app:
        assert PURGE_JOB not in app.jobs
    await backend.close()


@pytest.mark.asyncio
async def test_the_pass_by_hand_and_the_job_s_pass_are_one_path() -> None:
    """`purge_pass` is what the purge job's body and `App.purge` both run: each target in order
    at one instant, through the step it is given; a dry run counts; duplicate names refused."""
    targets = [Target("a"), Target("b")]
    stepped: list[str] = []

    async def step(name: str, run: Callable[[int], Awaitable[int]], now_ms: int) -> int:
        stepped.append(name)
        return await run(now_ms)

    assert await purge_pass(targets, 7, step=step) == {"a": 1, "b": 1}
    assert (stepped, targets[0].asked, targets[1].asked) == (["a", "b"], [7], [7])
    assert await purge_pass(targets, 9, dry_run=True) == {"a": 0, "b": 0}
    assert targets[0].asked == [7]
    with pytest.raises(DeclarationInvalidError):
        await purge_pass([Target("a"), Target("a")], 7)
