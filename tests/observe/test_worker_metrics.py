"""A real `xjobs worker` process with `--metrics-port`: after jobs of every outcome ran on Postgres and
Redis, its `/metrics` (parsed with prometheus_client's parser) counts exactly what ran."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

import xjobs
from xjobs import JobRecord

from . import obs_app
from .obs_app import QUEUE, Item
from .process import WorkerProcess, start_worker

SETTLE_WITHIN_S = 60.0

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def parse(text: str) -> Samples:
    """Every sample of an exposition by name and labels."""
    samples: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return samples


def by_job(samples: Samples, name: str, *keep: str) -> dict[tuple[str, ...], float]:
    """The samples called `name`, keyed by the values of the labels `keep`, zeros left out."""
    found: dict[tuple[str, ...], float] = {}
    for (sample, labels), value in samples.items():
        if sample == name and value:
            named = dict(labels)
            found[tuple(named[k] for k in keep)] = value
    return found


async def until(
    what: str, check: Callable[[], Awaitable[bool]], within_s: float = SETTLE_WITHIN_S
) -> None:
    deadline = time.monotonic() + within_s
    while not await check():
        if time.monotonic() > deadline:
            pytest.fail(f"{what} did not happen within {within_s}s")
        await asyncio.sleep(0.05)


async def state_is(app: xjobs.App, job_id: str, state: str) -> bool:
    record: JobRecord = await app.get_job(job_id)
    return record.state == state


async def scrape(worker: WorkerProcess) -> Samples:
    status, body = await asyncio.to_thread(worker.get, "/metrics")
    assert status == 200, body
    return parse(body)


EXPECTED_SETTLED = {
    ("fine", "completed"): 3,
    ("flaky", "retried"): 1,
    ("flaky", "completed"): 1,
    ("doomed", "retried"): 1,
    ("doomed", "dead"): 1,
    ("dropped", "dropped"): 1,
    ("exclusive", "completed"): 1,
    ("exclusive", "refused"): 1,
    ("lingering", "cancelled"): 1,
}
EXPECTED_JOBS = {
    ("fine",): 3,
    ("flaky",): 1,
    ("doomed",): 1,
    ("dropped",): 1,
    ("exclusive",): 2,
    ("lingering",): 1,
}
EXPECTED_RUNS = {
    ("fine",): 3,
    ("flaky",): 2,
    ("doomed",): 2,
    ("dropped",): 1,
    ("exclusive",): 2,
    ("lingering",): 1,
}


async def _run_every_outcome(app: xjobs.App, markers: Path) -> None:
    for n in range(3):
        await app.enqueue(obs_app.fine, Item(key=f"fine-{n}"))
    await app.enqueue(obs_app.flaky, Item(key="flaky"))
    await app.enqueue(obs_app.doomed, Item(key="doomed"))
    await app.enqueue(obs_app.dropped, Item(key="dropped"))
    # refused: a second holder of a `when_busy="fail"` key while the first holds it
    holder = await app.enqueue(obs_app.exclusive, Item(key="holder"))
    await until("the holder running", lambda: state_is(app, holder.job_id, "running"))
    second = await app.enqueue(obs_app.exclusive, Item(key="second"))
    await until("the second holder refused", lambda: state_is(app, second.job_id, "failed"))
    (markers / "release-holder").touch()
    # cancelled: an operator cancels a running job; its next heartbeat ends the run
    lingering = await app.enqueue(obs_app.lingering, Item(key="lingering"))
    await until("the lingering job running", lambda: state_is(app, lingering.job_id, "running"))
    await app.cancel_job(lingering.job_id)


@pytest.mark.asyncio
async def test_a_worker_process_counts_each_outcome_it_ran(
    durable_url: str, tmp_path: Path
) -> None:
    worker = await asyncio.to_thread(start_worker, durable_url, tmp_path, "--metrics-port", "PORT")
    try:
        enqueuer = xjobs.App(backend=durable_url, jobs=[obs_app])
        counted = enqueuer.telemetry.enable_metrics()
        async with enqueuer as app:
            await _run_every_outcome(app, tmp_path)
        enqueued = by_job(
            parse(counted.exposition()[0].decode()), "xjobs_jobs_enqueued_total", "job"
        )

        async def all_settled() -> bool:
            samples = await scrape(worker)
            return by_job(samples, "xjobs_jobs_settled_total", "job", "outcome") == EXPECTED_SETTLED

        await until("every outcome counted", all_settled)
        samples = await scrape(worker)
    finally:
        log = await asyncio.to_thread(worker.stop)

    assert by_job(samples, "xjobs_jobs_settled_total", "job", "outcome") == EXPECTED_SETTLED, log
    assert by_job(samples, "xjobs_job_duration_seconds_count", "job") == EXPECTED_RUNS, log
    assert by_job(samples, "xjobs_job_lateness_seconds_count", "job") == EXPECTED_RUNS, log
    assert by_job(samples, "xjobs_jobs_running", "queue") == {}, log
    assert by_job(samples, "xjobs_leases_lost_total", "job") == {}, log
    assert by_job(samples, "xjobs_jobs_buried_total", "job") == {}, log
    # the enqueuing process counted each job it put in; the worker enqueued none
    assert enqueued == EXPECTED_JOBS
    assert by_job(samples, "xjobs_jobs_enqueued_total", "job") == {}, log
    assert all(dict(labels).get("queue", QUEUE) == QUEUE for _, labels in samples), log
