"""Faults: the Postgres primary dies (`pg_ctl stop -m immediate`) and its streaming standby is
promoted (`pg_ctl promote`) under load: a producer enqueuing ~50/s, two worker processes running
a two-step job, a relay and a scheduler, every one on the multi-host URL
`postgresql://primary,standby/postgres?target_session_attrs=read-write`.

Promised with a synchronous standby (`synchronous_commit=on`): no acknowledged enqueue, stored
step or landed settle is lost, nothing is settled twice, nothing is stuck, and every refusal the
producer met was `XJOBS_BACKEND_UNAVAILABLE` (retried with the same key). With asynchronous
streaming, what the standby had not received is lost: on loopback that is next to nothing, so a
third scenario cuts the standby off its primary a second before the stop (a partition, a slow
link) and measures the loss. The loss is printed and reported, never asserted; what is asserted
is that nothing is stuck, every refusal was UNAVAILABLE, and no settle lands twice on the new
primary: a run whose claim lived only on the dead primary is fenced out there.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Iterator

import asyncpg
import psycopg
import pytest

import xjobs
from xjobs.contract.stores import OutboxStore
from xjobs.errors import BackendUnavailableError
from xjobs_pg.backend import asyncpg_dsn
from xjobs_pg.servers import ServerUnavailable, unavailable

from . import harness
from .failover_app import Paced, paced
from .harness import LEASE_S, Producer, Scene, until, until_async
from .replicas import ReplicaPair, replay_lag_bytes, start_pair

EVERY_S = 0.02  # ~50 enqueues a second once the round trip is paid
PRODUCED = 300
STRIKE_AFTER_S = 2.0
STAGED = 10
BEHIND_S = 1.0  # how long before the stop the standby is cut off, in the loss scenario


@pytest.fixture
def pair(request: pytest.FixtureRequest) -> Iterator[ReplicaPair]:
    """A primary and a standby of this scenario's own (`sync` or `async`), stopped after."""
    try:
        started = start_pair(synchronous=request.param == "sync")
    except (ServerUnavailable, FileNotFoundError) as exc:
        unavailable(f"no Postgres primary and standby for the failover scenarios: {exc}")
    try:
        yield started
    finally:
        started.close()


@pytest.fixture
def target(pair: ReplicaPair) -> harness.Target:
    """The scenario's backend: a schema of its own on the pair, through the multi-host URL."""
    return harness.Target("postgres", harness.with_option(pair.url, "xjobs_schema=xjobs_failover"))


def worker(scene: Scene) -> harness.Proc:
    flags = ["--lease", str(LEASE_S), "--concurrency", "5", "--drain-timeout", "2"]
    return scene.start("worker", "failover_app:app", *flags, "--log-level", "INFO")


def lost_steps(scene: Scene) -> list[str]:
    """Steps whose stored result came back to a run and whose function was called again later:
    a replay that found no record of them."""
    held: dict[tuple[str, str], float] = {}
    for row in scene.effects.rows("step-held"):
        held.setdefault((row["key"], row["step"]), row["at"])
    return sorted(
        f"{row['key']}/{row['step']}"
        for row in scene.effects.rows("step")
        if row["at"] > held.get((row["key"], row["step"]), row["at"])
    )


def settles(scene: Scene, *, before: float, after: float) -> tuple[list[str], list[str]]:
    """Jobs whose ending settle landed on the old primary (before `before`) and landed again on the
    new one (after `after`): an acknowledged settle lost; and jobs whose settle landed twice on
    the new primary: a fence that did not hold."""
    old: set[str] = set()
    new: Counter[str] = Counter()
    for row in scene.effects.rows("settled"):
        if row["at"] < before:
            old.add(row["job"])
        elif row["at"] > after:
            new[row["job"]] += 1
    return sorted(old & set(new)), sorted(job for job, n in new.items() if n > 1)


async def stage(scene: Scene, keys: list[str]) -> list[xjobs.EnqueueResult]:
    """Stage `keys` in transactions of the test's own on the multi-host URL: the first half on an
    asyncpg connection, the rest on a psycopg one (libpq reads the same URL)."""
    dsn = asyncpg_dsn(scene.url)[0]
    half = len(keys) // 2
    conn = await asyncpg.connect(dsn, timeout=10)
    try:
        async with conn.transaction():
            staged = await paced.stage_many(conn, [Paced(key=k) for k in keys[:half]])
    finally:
        await conn.close()
    pconn = await psycopg.AsyncConnection.connect(dsn, connect_timeout=10)
    async with pconn, pconn.transaction():
        staged += await paced.stage_many(pconn, [Paced(key=k) for k in keys[half:]])
    return staged


async def _relayed(outbox: OutboxStore) -> bool:
    return await outbox.pending() == 0


async def _replayed(pair: ReplicaPair) -> bool:
    return await replay_lag_bytes(pair) == 0


def leading(proc: harness.Proc) -> bool:
    """Whether the last leadership line of a scheduler says it leads."""
    lines = [ln for ln in proc.text().splitlines() if "jobs.scheduler.lead" in ln]
    return bool(lines) and "jobs.scheduler.leading" in lines[-1]


def report(
    scene: Scene,
    setting: str,
    feed: Producer,
    *,
    lag: int,
    struck: float,
    promoted: float,
    acked_before: dict[str, float],
) -> None:
    """Print the scenario's measurements and keep them for the `--report` figures table."""
    ledger = scene.ledger
    window = [k for k in ledger.lost_keys if k in acked_before]
    oldest = max((struck - acked_before[k] for k in window), default=0.0)
    enqueued = [at for key, at in ledger.acked_at.items() if at > promoted and key[0] == "p"]
    landed = [r["at"] for r in scene.effects.rows("settled") if r["at"] > promoted]
    to_enqueue = min(enqueued, default=struck) - struck
    to_settle = min(landed, default=struck) - struck
    lost_settles, twice = settles(scene, before=struck, after=promoted)
    figures = {
        "acknowledged operations lost": f"{ledger.lost} of {ledger.acknowledged} enqueues "
        f"(the oldest acknowledged {oldest * 1000:.0f} ms before the stop), "
        f"{len(lost_steps(scene))} stored steps, {len(lost_settles)} settles; settled twice on "
        f"the new primary: {len(twice)}",
        "stop to promoted / next enqueue / next settle": f"{promoted - struck:.2f} s / "
        f"{to_enqueue:.2f} s / {to_settle:.2f} s",
        "replay lag at the stop": f"{lag} bytes",
    }
    for what, figure in figures.items():
        harness.FIGURES[f"Postgres failover, {setting}: {what}"] = figure
    print(
        f"\n{setting}: producer refusals {dict(Counter(feed.codes))}; "
        + "; ".join(f"{what}: {figure}" for what, figure in figures.items())
    )


@pytest.mark.scenario("Postgres failover: standby promoted under load")
@pytest.mark.parametrize(
    ("pair", "behind_s"), [("sync", 0.0), ("async", 0.0), ("async", BEHIND_S)], indirect=["pair"]
)
@pytest.mark.asyncio
async def test_a_standby_promoted_under_load(
    scene: Scene, pair: ReplicaPair, behind_s: float
) -> None:
    setting = pair.setting + (f", standby cut off {behind_s:.0f} s before" if behind_s else "")
    scene.ledger.scenario = f"Postgres failover under load ({setting})"
    async with xjobs.App(scene.url, jobs=[paced], retention=None) as app:
        fleet = [worker(scene), worker(scene)]
        await scene.started(*fleet)  # two at a time: four imports at once outlast the bound here
        fleet += [scene.relay(), scene.scheduler()]
        await scene.started(*fleet[2:])
        feed = Producer(paced, scene.ledger, lambda key: Paced(key=key), PRODUCED, EVERY_S)
        producing = asyncio.ensure_future(feed.run())
        await asyncio.sleep(STRIKE_AFTER_S)
        lag = await replay_lag_bytes(pair)
        async with scene.window(f"primary stopped -m immediate, standby promoted ({setting})"):
            if behind_s:  # the primary goes on acknowledging what the standby never receives
                await asyncio.to_thread(pair.detach)
                await asyncio.sleep(behind_s)
            struck = time.time()
            acked_before = dict(scene.ledger.acked_at)
            await asyncio.to_thread(pair.stop_primary)
            await asyncio.to_thread(pair.promote)
        promoted = scene.faults[-1].end
        staged_keys = [f"staged-{n}" for n in range(STAGED)]
        scene.ledger.acknowledge_all(staged_keys, await stage(scene, staged_keys))
        await producing
        outbox = app.outbox_backend.outbox
        assert outbox is not None
        await until_async(lambda: _relayed(outbox), what="the relay to publish the staged jobs")
        ledger = await scene.settle(
            app
        )  # staged=False: a job lost to the promotion is not waited for
        await until(lambda: leading(fleet[3]), what="the scheduler to lead on the new primary")
    report(
        scene, setting, feed, lag=lag, struck=struck, promoted=promoted, acked_before=acked_before
    )
    if ledger.stuck:  # what the fleet was doing, for the failure's reader
        for proc in scene.procs:
            print(f"--- {proc.name}\n" + "\n".join(proc.text().splitlines()[-15:]))
    assert set(feed.codes) <= {BackendUnavailableError.code}, (
        f"a refusal during the failover was not UNAVAILABLE: {Counter(feed.codes)}"
    )
    lost_settles, twice = settles(scene, before=struck, after=promoted)
    assert not twice, f"a settle landed twice on the new primary (the fence): {twice}"
    if pair.synchronous:
        assert not lost_steps(scene), "a stored step was lost across the promotion"
        assert not lost_settles, f"a landed settle was lost across the promotion: {lost_settles}"
        ledger.check(duplicated=None if promoted - struck >= LEASE_S else 0)
    else:
        ledger.check(lost=ledger.lost)


@pytest.mark.parametrize("pair", ["async"], indirect=True)
@pytest.mark.asyncio
async def test_an_enqueue_on_a_standby_is_refused_as_unavailable(pair: ReplicaPair) -> None:
    async with xjobs.App(pair.primary.url + "?xjobs_schema=xjobs_ro", jobs=[paced]):
        pass  # the schema, installed on the primary, streams to the standby
    await until_async(lambda: _replayed(pair), what="the standby to replay the schema")
    async with xjobs.App(pair.standby.url + "?xjobs_schema=xjobs_ro", jobs=[paced]) as app:
        with pytest.raises(BackendUnavailableError, match="takes no writes"):
            await app.enqueue(paced, Paced(key="on-the-standby"))


@pytest.mark.parametrize("pair", ["async"], indirect=True)
@pytest.mark.asyncio
async def test_an_app_whose_hosts_hold_no_primary_is_refused_as_unavailable(
    pair: ReplicaPair,
) -> None:
    # mid-failover: the primary gone, the standby not promoted yet (asyncpg raises
    # TargetServerAttributeNotMatched, one of its client errors)
    url = (
        f"postgresql://postgres@127.0.0.1:{pair.standby.port}/postgres"
        "?target_session_attrs=read-write&xjobs_schema=xjobs_ro"
    )
    with pytest.raises(BackendUnavailableError, match="TargetServerAttributeNotMatched"):
        async with xjobs.App(url, jobs=[paced]):
            pass
