"""Many processes on one file: four `xjobs worker` processes and two enqueuing processes, one worker
killed with SIGKILL mid-run. Every job completes, once; a body runs again only when its worker died
during it; no "database is locked" reaches any process's output."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from xjobs_sqlite.backend import open_backend
from xjobs_sqlite.testing import file_url

HERE = Path(__file__).parent
ENQUEUERS, PER_ENQUEUER, WORKERS = 2, 100, 4
TOTAL = ENQUEUERS * PER_ENQUEUER

ENQUEUE = """
import asyncio, sys
import fleet_app

async def main(n):
    async with fleet_app.app:
        for i in range(int(sys.argv[2])):
            await fleet_app.work.enqueue(fleet_app.Item(key=f"{n}-{i}"))

asyncio.run(main(sys.argv[1]))
"""


def _effects(path: Path) -> list[dict[str, object]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line]


def _states(db: Path) -> Counter[str]:
    conn = sqlite3.connect(db, timeout=30)
    try:
        return Counter(str(row[0]) for row in conn.execute("select state from jobs"))
    finally:
        conn.close()


def _until(done: Callable[[], bool], what: str, timeout_s: float = 90) -> None:
    deadline = time.monotonic() + timeout_s
    while not done():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def test_a_fleet_on_one_file_through_a_kill_9_completes_every_job_once(tmp_path: Path) -> None:
    db, effects = tmp_path / "xjobs.db", tmp_path / "effects.jsonl"

    async def install() -> None:
        await (await open_backend(file_url(db))).close()

    asyncio.run(install())
    env = {
        **os.environ,
        "XJOBS_FLEET_URL": file_url(db),
        "XJOBS_FLEET_EFFECTS": str(effects),
        "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]),
    }
    logs = [tmp_path / f"worker-{n}.log" for n in range(WORKERS)]
    worker_argv = [sys.executable, "-m", "xjobs_cli", "worker", "fleet_app:app"]
    worker_argv += ["--lease", "2", "--concurrency", "5", "--drain-timeout", "2"]
    handles = [log.open("w") for log in logs]
    workers = [
        subprocess.Popen(worker_argv, cwd=HERE, env=env, stdout=out, stderr=subprocess.STDOUT)
        for out in handles
    ]
    enqueuers = [
        subprocess.Popen(
            [sys.executable, "-c", ENQUEUE, str(n), str(PER_ENQUEUER)],
            cwd=HERE,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for n in range(ENQUEUERS)
    ]
    try:
        # the victim is the worker that started a run first (a worker still importing when the
        # others have taken every job would never run one)
        _until(lambda: any(e["ev"] == "start" for e in _effects(effects)), "a run on some worker")
        first = next(e["pid"] for e in _effects(effects) if e["ev"] == "start")
        victim = next(w for w in workers if w.pid == first)
        victim.send_signal(signal.SIGKILL)
        outputs = [enqueuer.communicate(timeout=120)[0] for enqueuer in enqueuers]
        assert all(e.returncode == 0 for e in enqueuers), outputs
        _until(lambda: _states(db)["completed"] == TOTAL, "every job completed")
    finally:
        for enqueuer in enqueuers:
            if enqueuer.poll() is None:
                enqueuer.kill()
            enqueuer.communicate()
        for worker in workers:
            if worker.poll() is None:
                worker.send_signal(signal.SIGTERM)
        for worker in workers:
            worker.wait(timeout=30)
        for out in handles:
            out.close()
    assert _states(db) == Counter({"completed": TOTAL})
    runs = Counter(str(e["job"]) for e in _effects(effects) if e["ev"] == "start")
    on_victim = {str(e["job"]) for e in _effects(effects) if e["pid"] == victim.pid}
    assert len(runs) == TOTAL
    assert {job for job, n in runs.items() if n > 1} <= on_victim
    texts = outputs + [log.read_text() for log in logs]
    assert not [text for text in texts if "database is locked" in text]
