"""End to end: three `xjobs scheduler` processes, one leader; `kill -9` the leader and another takes over.

Every occurrence fires exactly once across the fleet (the job rows and the fire logs are counted),
on Postgres and on Redis. Occurrences are whole minutes, so each test waits for one or two of them.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import xjobs
from xjobs.contract.driver import ClaimOptions

HERE = Path(__file__).parent
TTL_S = "2"
RENEW_S = "0.5"
LEAD_WAIT_S = 15.0
FIRE_WAIT_S = 75.0  # up to a minute to the next occurrence, plus a takeover
POLL_S = 0.1
FIRED = re.compile(r"jobs\.scheduler\.fired .*occurrence_ms=(\d+)")


class Scheduler:
    """One `xjobs scheduler cron_app:app` process, its stderr in a file."""

    def __init__(self, url: str, log: Path) -> None:
        self.log = log
        env = {**os.environ, "XJOBS_E2E_URL": url}
        command = [
            sys.executable, "-m", "xjobs_cli", "scheduler", "cron_app:app",
            "--leader-ttl", TTL_S, "--renew-every", RENEW_S,
        ]  # fmt: skip
        self._err = log.open("w")
        self.process = subprocess.Popen(
            command, cwd=HERE, env=env, stdout=subprocess.DEVNULL, stderr=self._err, text=True
        )

    def text(self) -> str:
        return self.log.read_text()

    @property
    def leading(self) -> bool:
        """Whether its last leadership line says it leads."""
        lines = [
            line
            for line in self.text().splitlines()
            if "jobs.scheduler.leading" in line or "jobs.scheduler.leadership-lost" in line
        ]
        return bool(lines) and "jobs.scheduler.leading" in lines[-1]

    def fired(self) -> list[int]:
        return [int(m.group(1)) for m in FIRED.finditer(self.text())]

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=10)
        self._err.close()

    def stop(self) -> int:
        self.process.send_signal(signal.SIGTERM)
        try:
            code = self.process.wait(timeout=30)
        finally:
            self._err.close()
        return code


async def wait_for(predicate: Callable[[], object], *, what: str, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        await asyncio.sleep(POLL_S)
    pytest.fail(f"{what} did not happen within {timeout_s}s")


async def fired_jobs(url: str) -> dict[int, int]:
    """How many job rows exist per occurrence, read through the app's own surface."""
    import cron_app

    async with xjobs.App(url, tasks=[cron_app.every_minute], retention=None) as app:
        fires = await app.task_fires()
        counts: dict[int, int] = {}
        result = await app.backend.jobs.claim(
            ClaimOptions("e2e-reader", {"cron-e2e": 1000}, 60_000)
        )
        for claimed in result.jobs:
            record = await app.backend.jobs.get(claimed.id)
            assert record is not None
            occurrence = int(record.idempotency_key.split(":")[1])
            counts[occurrence] = counts.get(occurrence, 0) + 1
        assert fires["report.every_minute"].occurrence_ms == max(counts)
        return counts


@pytest.fixture
def on_path() -> Iterator[None]:
    sys.path.insert(0, str(HERE))
    yield
    sys.path.remove(str(HERE))


@pytest.mark.asyncio
async def test_killing_the_leader_hands_over_and_each_occurrence_fires_once(
    durable_url: str, tmp_path: Path, on_path: None
) -> None:
    fleet = [Scheduler(durable_url, tmp_path / f"scheduler-{n}.log") for n in range(3)]
    try:
        await wait_for(
            lambda: sum(s.leading for s in fleet) == 1, what="one leader", timeout_s=LEAD_WAIT_S
        )
        (leader,) = [s for s in fleet if s.leading]
        await asyncio.sleep(1.5)  # three renewals: still exactly one leader
        assert sum(s.leading for s in fleet) == 1
        assert leader.leading
        leader.kill()
        rest = [s for s in fleet if s is not leader]
        await wait_for(
            lambda: sum(s.leading for s in rest) == 1, what="a new leader", timeout_s=LEAD_WAIT_S
        )
        (heir,) = [s for s in rest if s.leading]
        await wait_for(lambda: heir.fired(), what="a fire by the new leader", timeout_s=FIRE_WAIT_S)
        codes = [s.stop() for s in rest]
    finally:
        for s in fleet:
            if s.process.poll() is None:
                s.kill()
    assert codes == [0, 0], [s.text() for s in rest]
    logged = [at for s in fleet for at in s.fired()]
    assert len(logged) == len(set(logged)), f"an occurrence was fired twice: {sorted(logged)}"
    counts = await fired_jobs(durable_url)
    assert set(counts) == set(logged)
    assert set(counts.values()) == {1}
    assert "jobs.scheduler.stopped" in heir.text()
