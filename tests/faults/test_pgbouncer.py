"""Fault scenario 27: leader election through pgbouncer in transaction mode — two schedulers, never two leaders.

Promised: behind a transaction-pooling proxy the scheduler's lease row still elects one leader
(the advisory-lock leader refuses there: `packages/xjobs-pg/tests/test_pgbouncer.py`). Sampled
every few milliseconds, at most one live scheduler says it leads; the leader is killed (`kill -9`)
just before a cron boundary, the heir takes over once the lease lapses, and the occurrence fires
exactly once. Every process, and the test's own app, reaches Postgres through the pgbouncer.
"""

from __future__ import annotations

import asyncio
from urllib.parse import parse_qsl, urlsplit

import pytest

import xjobs
from xjobs_pg.pooler import pgbouncer_url
from xjobs_pg.servers import ServerUnavailable, direct_postgres_url, unavailable

from .fault_app import every_minute, tick
from .harness import Proc, Scene, until, until_async, with_option
from .test_scheduler import boundary, cron_ledger, has_fired, leading, next_boundary, sleep_until

TTL_S = 2.0
SAMPLE_S = 0.01


def through_pgbouncer(url: str) -> str:
    """The scenario's schema on the test server, reached through a pgbouncer in transaction mode."""
    try:
        pooled = pgbouncer_url(direct_postgres_url(), "transaction")
    except ServerUnavailable as exc:
        unavailable(f"no pgbouncer for scenario 27: {exc}")
    schema = dict(parse_qsl(urlsplit(url).query))["xjobs_schema"]
    return with_option(pooled, f"xjobs_schema={schema}")


class LeaderWatch:
    """Samples the fleet until stopped: the most live schedulers ever seen leading at once."""

    def __init__(self, fleet: list[Proc]) -> None:
        self.fleet = fleet
        self.most = 0
        self.samples = 0
        self._task = asyncio.ensure_future(self._watch())

    async def _watch(self) -> None:
        while True:
            self.most = max(self.most, sum(1 for p in self.fleet if p.alive and leading(p)))
            self.samples += 1
            await asyncio.sleep(SAMPLE_S)

    async def stop(self) -> None:
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)


@pytest.mark.scenario("Leader election through pgbouncer (transaction mode)")
@pytest.mark.parametrize("target", ["postgres"], indirect=True)
@pytest.mark.asyncio
async def test_two_schedulers_through_pgbouncer_never_lead_together(scene: Scene) -> None:
    scene.worker_url = through_pgbouncer(scene.url)
    offset_ms, minute_ms, at = boundary()
    scene.extra_env["XJOBS_FAULT_CLOCK_OFFSET_MS"] = str(offset_ms)
    async with xjobs.App(
        scene.worker_url, jobs=[tick], tasks=[every_minute], retention=None
    ) as app:
        fleet = [scene.scheduler(ttl_s=TTL_S), scene.scheduler(ttl_s=TTL_S)]
        worker = scene.worker()
        watch = LeaderWatch(fleet)
        try:
            await scene.started(*fleet, worker)
            await until(lambda: sum(map(leading, fleet)) == 1, what="one leader")
            (leader,) = [s for s in fleet if leading(s)]
            (heir,) = [s for s in fleet if s is not leader]
            minute_ms, at = next_boundary(minute_ms, at, 0.5)
            await sleep_until(at - 0.2)
            scene.kill(leader)  # just before the boundary: the heir fires it once the lease lapses
            await until(lambda: leading(heir), what="the heir to lead", timeout_s=3 * TTL_S + 5)
            await until_async(
                lambda: has_fired(app, minute_ms), what="the occurrence to fire", timeout_s=15
            )
            await asyncio.sleep(TTL_S)  # a late second fire would show now
        finally:
            await watch.stop()
        await cron_ledger(scene, app, offset_ms, fleet)
    print(f"\n{watch.samples} samples of the fleet; at most {watch.most} leading at once")
    scene.ledger.check(duplicated=0)
    assert watch.samples > 0
    assert watch.most == 1, "two schedulers led at once through the pooler"
