"""Parity: retention is on by default — a default `App` purges finished jobs on its cron (completed
a day, dead a week), and `retention=None` keeps everything (semantics.md, "Factories": `purge()`)."""

from __future__ import annotations

import pytest

from xjobs import JobContext, Terminal, job
from xjobs.app import App
from xjobs.contract.retention import DEFAULT_RETENTION
from xjobs.errors import AppStateError
from xjobs.factories.purge import PURGE_JOB
from xjobs.testing.parity.env import ParityEnv
from xjobs.testing.parity.jobs import LEASE, QUEUE, Item, key_of, org_of

pytestmark = [pytest.mark.xjobs_parity, pytest.mark.requires("retention")]

HOUR_MS = 3_600_000
DAY_MS = 24 * HOUR_MS


def _declare() -> object:
    @job(tenant=org_of, idempotency_key=key_of, queue=QUEUE)
    async def charge(ctx: JobContext, input: Item) -> str:
        if input.key.startswith("refused"):
            raise Terminal("the card was refused")
        return f"charged {input.key}"

    return charge


async def _settle(app: App, key: str) -> str:
    """Enqueue `charge` for `key`, run it to its end, and answer its job id."""
    run = await app.enqueue(app.jobs["charge"], Item(key=key))
    await app.run_worker(lease=LEASE, until_idle=True)
    return run.job_id


async def _state(app: App, job_id: str) -> str | None:
    record = await app.backend.jobs.get(job_id)
    return None if record is None else record.state


async def test_a_default_app_registers_the_purge_task_and_none_turns_it_off(
    parity: ParityEnv,
) -> None:
    """Rule: an `App` given no `retention` keeps `DEFAULT_RETENTION` (completed and cancelled a
    day, failed and dead a week) and registers its purge task; `retention=None` registers none."""
    on = App(parity.backend, jobs=[_declare()], clock=parity.clock)
    assert on.retention is DEFAULT_RETENTION
    kept = {state: DEFAULT_RETENTION.kept_ms[state] for state in ("completed", "cancelled")}
    assert kept == {"completed": DAY_MS, "cancelled": DAY_MS}
    assert DEFAULT_RETENTION.kept_ms["failed"] == DEFAULT_RETENTION.kept_ms["dead"] == 7 * DAY_MS
    assert on.registry.tasks[PURGE_JOB].cron == DEFAULT_RETENTION.cron
    off = App(parity.backend, jobs=[_declare()], clock=parity.clock, retention=None)
    assert PURGE_JOB not in off.registry.tasks
    assert PURGE_JOB not in off.jobs


async def test_a_default_app_s_purge_keeps_each_state_its_default_time(parity: ParityEnv) -> None:
    """Rule: a completed job goes a day after it finished, a younger one stays, and a dead job
    stays until it is a week old."""
    async with App(parity.backend, jobs=[_declare()], clock=parity.clock) as app:
        old = await _settle(app, "old")
        dead = await _settle(app, "refused")
        assert (await _state(app, old), await _state(app, dead)) == ("completed", "dead")
        parity.clock.advance(DAY_MS + HOUR_MS)
        young = await _settle(app, "young")
        assert (await app.purge())["jobs"] == 1
        states = [await _state(app, i) for i in (old, young, dead)]
        assert states == [None, "completed", "dead"]
        parity.clock.advance(6 * DAY_MS)  # the dead job is a week and an hour old
        assert (await app.purge())["jobs"] == 2
        assert [await _state(app, i) for i in (young, dead)] == [None, None]


@pytest.mark.requires("scheduler", "leader", "steps")
async def test_a_default_app_s_scheduler_fires_the_purge_on_its_cron(parity: ParityEnv) -> None:
    """Rule: the default policy is real: the leader fires `xjobs.purge` on its cron and a worker
    serving its queue runs the pass."""
    async with App(parity.backend, jobs=[_declare()], clock=parity.clock) as app:
        old = await _settle(app, "old")
        parity.clock.advance(2 * DAY_MS)
        scheduler = app.scheduler()
        await scheduler.tick()  # arms the purge task at its next occurrence
        parity.clock.advance(5 * 60_000)
        await scheduler.tick()
        await scheduler.stop()
        await app.run_worker(lease=LEASE, until_idle=True)
        assert await _state(app, old) is None
        fires = await app.task_fires()
        assert PURGE_JOB in fires


async def test_retention_none_purges_nothing(parity: ParityEnv) -> None:
    """Rule: `retention=None` turns retention off: nothing is registered to purge, a pass by hand
    without a policy is refused (`XJOBS_APP_STATE`), and a finished job stays however old."""
    async with App(parity.backend, jobs=[_declare()], clock=parity.clock, retention=None) as app:
        old = await _settle(app, "old")
        dead = await _settle(app, "refused")
        parity.clock.advance(30 * DAY_MS)
        with pytest.raises(AppStateError):
            await app.purge()
        assert (await _state(app, old), await _state(app, dead)) == ("completed", "dead")
