"""End to end: three `xjobs worker` processes share one rate limit of 50 starts a second on one key.

On Postgres and on Redis, a backlog of one key's jobs is enqueued, then three worker processes run
it. Over 20 s (after the first second, the burst) the achieved rate is within 10% of 50/s, and no
window of the starts holds more than the burst plus the window's share (GCRA: no fixed window
lets twice the limit through at its edge). The wall clock only measures here; nothing waits on it
but the 20 s the measurement needs.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import xjobs

HERE = Path(__file__).parent
WORKERS = 3
BACKLOG = 1_300  # more than the 20 s window and the burst can start: the limit binds throughout
SETTLE_S = 1.0  # the burst is spent in the first second; the measurement starts after it
MEASURE_S = 20.0
SLACK_S = 0.25  # how much later than its permit a start may be recorded (claim and start jitter)
WAIT_S = 60.0


def start(n: int, env: dict[str, str], folder: Path) -> tuple[subprocess.Popen[bytes], Path]:
    log = folder / f"worker-{n}.log"
    with log.open("wb") as err:  # the child keeps its own descriptor
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "xjobs_cli",
                "worker",
                "rate_fleet_app:app",
                "--concurrency",
                "4",
                "--drain-timeout",
                "5",
                "--log-level",
                "INFO",
            ],
            cwd=HERE,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
    return process, log


def stop(process: subprocess.Popen[bytes]) -> int:
    """SIGTERM, then the exit code (killed, and a failure, if it does not exit)."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
    try:
        return process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        return -signal.SIGKILL


def starts(path: Path) -> list[float]:
    """Every recorded start, in order."""
    if not path.exists():
        return []
    return sorted(float(line.split()[0]) for line in path.read_text().splitlines())


def most_in_window(times: list[float], width_s: float) -> int:
    """The most starts any window `[t, t + width_s)` that opens at a start holds."""
    most, j = 0, 0
    for i, opened in enumerate(times):
        j = max(j, i)
        while j < len(times) and times[j] < opened + width_s:
            j += 1
        most = max(most, j - i)
    return most


@pytest.fixture
def on_path() -> Iterator[None]:
    """The app module's folder on sys.path, as the processes have it (their cwd)."""
    sys.path.insert(0, str(HERE))
    yield
    sys.path.remove(str(HERE))


@pytest.mark.asyncio
async def test_three_workers_share_one_rate_limit_of_fifty_a_second(
    durable_url: str, tmp_path: Path, on_path: None
) -> None:
    import rate_fleet_app as fleet_app

    run_file = tmp_path / "runs.txt"
    env = {**os.environ, "XJOBS_E2E_URL": durable_url, "XJOBS_E2E_RUNS": str(run_file)}
    async with xjobs.App(durable_url, jobs=[fleet_app.send]) as app:
        items = [fleet_app.Send(org="hot", n=n) for n in range(BACKLOG)]
        await app.enqueue_many(fleet_app.send, items)
    fleet = [start(n, env, tmp_path) for n in range(WORKERS)]
    try:
        deadline = time.monotonic() + WAIT_S
        while not starts(run_file):
            dead = [p.args for p, _ in fleet if p.poll() is not None]
            assert not dead, f"a worker exited before the first start: {dead}"
            assert time.monotonic() < deadline, "no run started"
            await asyncio.sleep(0.1)
        first = starts(run_file)[0]
        await asyncio.sleep(max(first + SETTLE_S + MEASURE_S - time.time(), 0) + SLACK_S)
    finally:
        codes = [stop(p) for p, _ in fleet]
    logs = {log.name: log.read_text(errors="replace")[-2000:] for _, log in fleet}
    assert codes == [0] * WORKERS, logs

    times = starts(run_file)
    opened = times[0] + SETTLE_S
    measured = [t for t in times if opened <= t < opened + MEASURE_S]
    rate = len(measured) / MEASURE_S
    burst = fleet_app.LIMIT  # the default burst is the limit
    per_s = fleet_app.LIMIT / fleet_app.PER.total_seconds()
    assert 0.9 * per_s <= rate <= 1.1 * per_s, f"achieved {rate:.1f}/s over {MEASURE_S} s"
    for width_s in (1.0, 5.0, MEASURE_S):
        most = most_in_window(times, width_s)
        assert most <= burst + per_s * (width_s + SLACK_S), (width_s, most)
    print(f"achieved rate {rate:.2f}/s, most in 1 s {most_in_window(times, 1.0)}")
