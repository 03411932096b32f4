"""`xjobs migrate` copies a SQLite project's jobs, steps, results and schedules to Postgres or Redis
(and back), and a worker on the new backend finishes the live jobs without redoing a done step."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

import xjobs
from xjobs.contract.driver import ClaimOptions, JobRecord, NewJob
from xjobs.contract.stores import StepRecord
from xjobs.ids import new_id_pair
from xjobs_cli.main import main

APP = Path(__file__).with_name("migrate_app.py")
TASK = "nightly"
WATERMARK_MS = 1_700_000_000_000
GONE_WORKER = "worker-killed-9"


@dataclass(frozen=True)
class Seeded:
    """The source's jobs by what they were when the copy began."""

    finished: dict[str, str]  # id -> state
    live: dict[str, str]  # id -> state
    running: str
    waiting: str
    delayed: str


@pytest.fixture
def app_module(app_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """`migrate_app`, imported fresh from the working directory."""
    (app_dir / "migrate_app.py").write_text(APP.read_text())
    monkeypatch.syspath_prepend(str(app_dir))
    import migrate_app

    migrate_app.CALLS.clear()
    return migrate_app


def _item(m: Any, key: str) -> Any:
    return m.Item(key=key)


async def _seed(m: Any, url: str) -> Seeded:
    """Three completed jobs with a step and a result, one dead, one cancelled, one waiting on an
    event after a step, one running (its worker was killed) with a done step, one delayed, two
    due, a task's watermark and last fire, and a paused queue."""
    async with m.build(url) as app:
        backend = app.backend
        done = [
            r.job_id
            for r in await m.stepped.enqueue_many([_item(m, f"done-{i}") for i in range(3)])
        ]
        dead = (await m.declined.enqueue(_item(m, "dead-0"))).job_id
        waiting = (await m.waiter.enqueue(_item(m, "wait-0"))).job_id
        await app.run_worker(until_idle=True)
        running = (await m.stepped.enqueue(_item(m, "run-0"))).job_id
        claimed = await backend.jobs.claim(
            ClaimOptions(worker_id=GONE_WORKER, queues={"default": 1}, lease_ms=3_600_000)
        )
        (job,) = claimed.jobs
        assert job.id == running
        step = StepRecord(job.run_id, "a", "done", json.dumps("a-run-0"), None, 0, 1)
        assert await backend.steps.put(job.claim, step)
        delayed = (await m.stepped.enqueue(_item(m, "later-0"), delay=timedelta(hours=1))).job_id
        due = [
            r.job_id for r in await m.stepped.enqueue_many([_item(m, "due-0"), _item(m, "due-1")])
        ]
        cancelled = (await m.stepped.enqueue(_item(m, "cancel-0"), delay=timedelta(hours=1))).job_id
        await app.operator.cancel(cancelled, "not wanted")
        cron_id, cron_run = new_id_pair()
        fired = NewJob(
            id=cron_id,
            run_id=cron_run,
            name="stepped",
            queue="default",
            tenant_id=None,
            idempotency_key="cron-0",
            payload=json.dumps({"key": "cron-0"}),
            priority=0,
            run_at_ms=None,
            max_attempts=3,
            dead_letter=True,
            enqueued_by=None,
            traceparent=None,
        )
        assert await backend.scheduler.fire(TASK, None, WATERMARK_MS, fired)
        assert await backend.introspection.pause("queue", "quiet")
    finished = {i: "completed" for i in done} | {dead: "dead", cancelled: "cancelled"}
    live = {i: "ready" for i in [*due, delayed, cron_id]}
    live |= {running: "running", waiting: "waiting"}
    return Seeded(finished, live, running, waiting, delayed)


async def _records(url: str, ids: list[str]) -> dict[str, JobRecord | None]:
    backend = await xjobs.connect(url)
    try:
        return {i: await backend.jobs.get(i) for i in ids}
    finally:
        await backend.close()


async def _steps_and_results(url: str, ids: list[str]) -> dict[str, tuple[Any, ...]]:
    backend = await xjobs.connect(url)
    try:
        found: dict[str, tuple[Any, ...]] = {}
        for job_id in ids:
            record = await backend.jobs.get(job_id)
            assert record is not None, job_id
            assert backend.steps is not None
            assert backend.results is not None
            steps = await backend.steps.list(record.run_id, record.queue)
            stored = await backend.results.read(job_id)
            found[job_id] = (
                [(s.name, s.status, s.result) for s in steps],
                None if stored is None else stored.result,
            )
        return found
    finally:
        await backend.close()


async def _schedule(url: str) -> tuple[dict[str, int], list[tuple[str, str]]]:
    backend = await xjobs.connect(url)
    try:
        assert backend.scheduler is not None
        assert backend.introspection is not None
        marks = await backend.scheduler.watermarks([TASK])
        pauses: list[tuple[str, str]] = [
            (p.kind, p.name) for p in await backend.introspection.pauses()
        ]
        return marks, pauses
    finally:
        await backend.close()


def _migrate(*args: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, Any, str]:
    capsys.readouterr()
    code = main(["migrate", *args, "--json"])
    captured = capsys.readouterr()
    return code, json.loads(captured.out) if code == 0 else captured.out, captured.err


def _sqlite(where: Path, name: str) -> str:
    return f"sqlite:///{where / name}"


@pytest.mark.parametrize("kind", ["postgres", "redis"])
def test_migrate_copies_every_job_step_result_and_schedule_and_the_target_finishes_the_live_jobs(
    app_module: Any,
    app_dir: Path,
    fresh_url: Callable[[str], str],
    capsys: pytest.CaptureFixture[str],
    kind: str,
) -> None:
    source = _sqlite(app_dir, "xjobs.db")
    target = fresh_url(kind)
    seeded = asyncio.run(_seed(app_module, source))
    every = [*seeded.finished, *seeded.live]
    before = asyncio.run(_steps_and_results(source, every))

    code, doc, err = _migrate("--from", source, "--to", target, capsys=capsys)

    assert code == 0, err
    assert doc["kind"] == "jobs.migrate"
    assert doc["jobs"] == {
        "copied": {"cancelled": 1, "completed": 3, "dead": 1, "ready": 6},
        "already_there": 0,
    }
    assert (doc["tasks"], doc["pauses"], doc["not_copied"]) == (1, 1, [])
    copied = asyncio.run(_records(target, every))
    states = {i: r.state if r else None for i, r in copied.items()}
    assert states == {**seeded.finished, **{i: "ready" for i in seeded.live}}
    assert asyncio.run(_steps_and_results(target, every)) == before
    assert asyncio.run(_schedule(target)) == ({TASK: WATERMARK_MS}, [("queue", "quiet")])
    dead = copied[next(i for i, s in seeded.finished.items() if s == "dead")]
    assert dead is not None
    assert "declined dead-0" in (dead.last_error or "")

    async def finish() -> None:
        async with app_module.build(target) as app:
            await app.run_worker(until_idle=True)
            await app.send_event("go", {"now": True})
            await app.run_worker(until_idle=True)

    app_module.CALLS.clear()
    asyncio.run(finish())
    after = asyncio.run(_records(target, every))
    live_ends = {i: r.state if r else None for i, r in after.items() if i in seeded.live}
    assert live_ends == {i: "ready" if i == seeded.delayed else "completed" for i in seeded.live}
    # the running job's and the waiting job's step "a" were copied: replayed, not run again
    assert sorted(app_module.CALLS) == ["cron-0", "due-0", "due-1"]


def test_a_round_trip_sqlite_to_postgres_to_sqlite_keeps_every_job_step_and_result(
    app_module: Any,
    app_dir: Path,
    fresh_url: Callable[[str], str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    source, back = _sqlite(app_dir, "xjobs.db"), _sqlite(app_dir, "back.db")
    middle = fresh_url("postgres")
    seeded = asyncio.run(_seed(app_module, source))
    every = [*seeded.finished, *seeded.live]

    assert _migrate("--from", source, "--to", middle, capsys=capsys)[0] == 0
    code, _, err = _migrate("--from", middle, "--to", back, capsys=capsys)

    assert code == 0, err
    assert asyncio.run(_steps_and_results(back, every)) == asyncio.run(
        _steps_and_results(source, every)
    )
    states = {i: r.state if r else None for i, r in asyncio.run(_records(back, every)).items()}
    assert states == {**seeded.finished, **{i: "ready" for i in seeded.live}}


def test_migrate_refuses_a_target_that_holds_jobs_and_with_merge_copies_nothing_twice(
    app_module: Any,
    app_dir: Path,
    fresh_url: Callable[[str], str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    source, target = _sqlite(app_dir, "xjobs.db"), fresh_url("postgres")
    seeded = asyncio.run(_seed(app_module, source))
    assert _migrate("--from", source, "--to", target, capsys=capsys)[0] == 0

    refused, out, err = _migrate("--from", source, "--to", target, capsys=capsys)
    merged, doc, _ = _migrate("--from", source, "--to", target, "--merge", capsys=capsys)

    assert refused == 2, out
    assert json.loads(err)["error"]["code"] == "XJOBS_TARGET_INVALID"
    assert "--merge" in json.loads(err)["error"]["message"]
    assert merged == 0
    total = len(seeded.finished) + len(seeded.live)
    assert doc["jobs"] == {"copied": {}, "already_there": total}


def test_migrate_live_only_leaves_the_finished_jobs_behind(
    app_module: Any,
    app_dir: Path,
    fresh_url: Callable[[str], str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    source, target = _sqlite(app_dir, "xjobs.db"), fresh_url("redis")
    seeded = asyncio.run(_seed(app_module, source))

    code, doc, err = _migrate("--from", source, "--to", target, "--live-only", capsys=capsys)

    assert code == 0, err
    assert doc["jobs"]["copied"] == {"ready": len(seeded.live)}
    left = asyncio.run(_records(target, list(seeded.finished)))
    assert set(left.values()) == {None}


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--from", "sqlite:///nowhere.db", "--to", "sqlite:///there.db"], "there is no file"),
        (["--from", "sqlite:///a.db", "--to", "sqlite:///a.db"], "the same backend"),
        (["--from", "memory://", "--to", "sqlite:///there.db"], "nothing to copy"),
        (["--from", "sqlite:///a.db"], "--to URL"),
    ],
    ids=["missing-source-file", "same-url", "memory-source", "no-target"],
)
def test_migrate_refuses_bad_urls_before_anything_is_written(
    app_dir: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    argv: list[str],
    says: str,
) -> None:
    monkeypatch.delenv("XJOBS_URL", raising=False)
    (app_dir / "a.db").touch()

    code, out, err = _migrate(*argv, capsys=capsys)

    assert code == 2, out
    error = json.loads(err)["error"]
    assert error["code"] == "XJOBS_TARGET_INVALID"
    assert says in error["message"]
    assert not (app_dir / "there.db").exists()
