"""End to end on one Postgres, then on one Redis (a 3-master Redis Cluster under
`XJOBS_TEST_REDIS_CLUSTER=1`, as `nox -s parity-redis-cluster` runs it): four `xjobs worker`
processes and two `xjobs scheduler` processes, as four hosts would run them.

10,000 jobs are enqueued while the fleet runs; each must run exactly once — a re-run is counted,
and it is explained only by a second claim of its job (a lease that lapsed), never by one claim
running twice. Three minutely tasks fire while the jobs run (the schedulers' clock is shifted so a
whole minute falls a few seconds after they arm): every occurrence that came due fires exactly
once across both schedulers, as one job row, and its job runs once.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

import xjobs
from xjobs.contract.driver import JobRecord
from xjobs.contract.introspection import JobFilter

HERE = Path(__file__).parent
JOBS = 10_000
BATCH = 1_000
WORKERS = 4
SCHEDULERS = 2
LEAD_S = 20.0  # the shifted minute falls this long after the test starts
WAIT_S = 120.0
POLL_S = 0.1
ARMED = re.compile(r"jobs\.scheduler\.armed task=(\S+) watermark_ms=(\d+)")
FIRED = re.compile(r"jobs\.scheduler\.fired task=(\S+) occurrence_ms=(\d+)")
STARTED = re.compile(r"jobs\.(worker|scheduler)\.started")
PAGE = 500


@dataclass
class Role:
    """One `xjobs <role>` process; its stderr in a file."""

    name: str
    process: subprocess.Popen[bytes]
    log: Path

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def stop(self) -> int:
        """SIGTERM, then its exit code (killed, and a failure, if it does not exit)."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            return -signal.SIGKILL


def start(role: str, target: str, n: int, env: dict[str, str], folder: Path) -> Role:
    flags = ["--drain-timeout", "5", "--log-level", "INFO"]
    if role == "scheduler":
        flags += ["--leader-ttl", "5", "--renew-every", "1"]
    log = folder / f"{role}-{n}.log"
    with log.open("wb") as err:  # the child keeps its own descriptor
        process = subprocess.Popen(
            [sys.executable, "-m", "xjobs_cli", role, target, *flags],
            cwd=HERE,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
    return Role(f"{role}-{n}", process, log)


async def wait_for(predicate: object, *, what: str, fleet: list[Role]) -> None:
    assert callable(predicate)
    deadline = time.monotonic() + WAIT_S
    while not predicate():
        dead = [r.name for r in fleet if r.process.poll() is not None]
        if dead:
            pytest.fail(f"{dead} exited while waiting for {what}")
        if time.monotonic() > deadline:
            pytest.fail(f"{what} did not happen within {WAIT_S} s")
        await asyncio.sleep(POLL_S)


def runs(path: Path) -> list[tuple[str, int, int]]:
    """Every run line: (job id, attempt, worker pid)."""
    if not path.exists():
        return []
    found = []
    for line in path.read_text().splitlines():
        job_id, attempt, pid = line.split()
        found.append((job_id, int(attempt), int(pid)))
    return found


def shifted_minute() -> tuple[int, int]:
    """A clock offset putting a whole minute `LEAD_S` from now: (offset ms, that minute in ms)."""
    at_ms = int((time.time() + LEAD_S) * 1000)
    minute_ms = at_ms // 60_000 * 60_000
    return minute_ms - at_ms, minute_ms


def due(schedulers: list[Role], until_ms: int) -> dict[str, set[int]]:
    """Per task, every whole minute after it was first armed, up to `until_ms` (schedulers' time)."""
    armed: dict[str, int] = {}
    for role in schedulers:
        for task, at in ARMED.findall(role.text()):
            armed[task] = min(armed.get(task, int(at)), int(at))
    return {
        task: set(range(at // 60_000 * 60_000 + 60_000, until_ms + 1, 60_000))
        for task, at in armed.items()
    }


def occurrence(idempotency_key: str) -> tuple[str, int]:
    """(task, occurrence ms) of a fired job's key `task:<ms>:<task>@<occurrence>`."""
    _, at, job_key = idempotency_key.split(":", 2)
    return job_key.split("@", 1)[0], int(at)


@pytest.fixture
def on_path() -> Iterator[None]:
    """The app module's folder on sys.path, as the processes have it (their cwd)."""
    sys.path.insert(0, str(HERE))
    yield
    sys.path.remove(str(HERE))


@pytest.mark.asyncio
async def test_four_workers_and_two_schedulers_run_each_job_once_and_fire_each_occurrence_once(
    durable_url: str, tmp_path: Path, on_path: None
) -> None:
    import many_hosts_app as fleet_app

    offset_ms, minute_ms = shifted_minute()
    run_file = tmp_path / "runs.txt"
    env = {
        **os.environ,
        "XJOBS_E2E_URL": durable_url,
        "XJOBS_E2E_RUNS": str(run_file),
        "XJOBS_E2E_CLOCK_OFFSET_MS": str(offset_ms),
        "PYTHONUNBUFFERED": "1",
    }
    # the schema is installed first, as a deploy migrates before it rolls out the fleet
    async with xjobs.App(durable_url, jobs=[fleet_app.count_item]):
        pass
    fleet = [
        start("scheduler", "many_hosts_app:cron_app", n, env, tmp_path) for n in range(SCHEDULERS)
    ]
    fleet += [start("worker", "many_hosts_app:app", n, env, tmp_path) for n in range(WORKERS)]
    schedulers = fleet[:SCHEDULERS]
    codes: list[int] = []
    try:
        await wait_for(
            lambda: all(STARTED.search(r.text()) for r in fleet), what="the fleet", fleet=fleet
        )
        async with xjobs.App(durable_url, jobs=[fleet_app.count_item]) as app:
            enqueued: list[str] = []
            for first in range(0, JOBS, BATCH):
                items = [fleet_app.Item(n=n) for n in range(first, first + BATCH)]
                enqueued += [r.job_id for r in await app.enqueue_many(fleet_app.count_item, items)]
        await wait_for(
            lambda: len({job for job, _, _ in runs(run_file)}) >= JOBS + len(fleet_app.TASKS),
            what="every job and the three occurrences to run",
            fleet=fleet,
        )
        await asyncio.sleep(1.0)  # a late duplicate run or fire would show now
        stopping_ms = time.time_ns() // 1_000_000 + offset_ms
    finally:
        codes = [role.stop() for role in fleet]
    logs = {role.name: role.text()[-3000:] for role in fleet}
    assert codes == [0] * len(fleet), logs

    rows = await job_rows(durable_url)
    ran = runs(run_file)
    per_job = Counter(job for job, _, _ in ran)
    item_rows = {row.id: row for row in rows if row.name == fleet_app.count_item.name}
    tick_rows = [row for row in rows if row.name == fleet_app.count_tick.name]

    # every job: one row, completed, run; a re-run is explained only by a claim of its own
    assert sorted(item_rows) == sorted(enqueued)
    assert {row.state for row in rows} == {"completed"}
    assert set(per_job) == set(item_rows) | {row.id for row in tick_rows}
    reruns = {job: n - 1 for job, n in per_job.items() if n > 1}
    unexplained = {
        job: (per_job[job], row.claims)
        for job, row in (*item_rows.items(), *((r.id, r) for r in tick_rows))
        if per_job[job] > row.claims
    }
    print(
        f"\n{len(ran)} runs of {len(per_job)} jobs on {len({pid for _, _, pid in ran})} worker "
        f"processes; re-runs {sum(reruns.values())} (each after a claim of its own); "
        f"per worker: {sorted(Counter(pid for _, _, pid in ran).values())}"
    )
    assert not unexplained, f"jobs run more often than claimed (runs, claims): {unexplained}"
    assert len({pid for _, _, pid in ran}) == WORKERS, "a worker process ran nothing"

    # every occurrence that came due fired once, by one scheduler, as one job row (one that
    # fell due in the last seconds before the stop may not have been fired yet)
    expected = due(schedulers, stopping_ms - 5_000)
    possible = due(schedulers, stopping_ms)
    assert set(expected) == set(fleet_app.TASKS)
    fired = Counter((task, int(at)) for s in schedulers for task, at in FIRED.findall(s.text()))
    assert set(fired.values()) == {1}, f"an occurrence was fired twice: {fired}"
    assert {(t, m) for t, minutes in expected.items() for m in minutes} <= set(fired)
    assert set(fired) <= {(t, m) for t, minutes in possible.items() for m in minutes}
    assert Counter(occurrence(row.idempotency_key) for row in tick_rows) == fired
    assert minute_ms in {m for _, m in fired}, "the shifted minute did not fire"


async def job_rows(url: str) -> list[JobRecord]:
    """Every job of the fleet's two queues, read through the operator surface a page at a time."""
    import many_hosts_app as fleet_app

    found: list[JobRecord] = []
    async with xjobs.App(url, jobs=[fleet_app.count_item]) as app:
        for queue in (fleet_app.QUEUE, fleet_app.CRON_QUEUE):
            cursor: str | None = None
            while True:
                page = await app.operator.list_jobs(
                    JobFilter(queue=queue), limit=PAGE, after=cursor
                )
                found += [await app.get_job(summary.id) for summary in page.jobs]
                if page.cursor is None:
                    break
                cursor = page.cursor
    return found
