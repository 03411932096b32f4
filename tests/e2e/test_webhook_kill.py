"""End to end: `webhook()` through real `xjobs worker` processes on Postgres and Redis, against a real local receiver.

A worker killed with `kill -9` mid-request leaves no ledger row for that attempt; a new worker
retries once the dead one's lease lapses, and the receiver gets the same `webhook-id` again,
signed. A 503 is recorded then retried to a delivery; a 410 is terminal. A receiver answering a
decompression bomb neither kills the worker nor grows it. The ledger is read back.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import xjobs
from xjobs.contract.webhooks import WebhookAttempt
from xjobs.factories import WebhookEvent, new_secret

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
from webhook_receiver import Receiver, receiving  # noqa: E402

sys.path.remove(str(HERE))

WAIT_S = 30.0
POLL_S = 0.05
LEASE_S = "2"  # the killed worker's claim lapses after this (2 s: a loaded machine keeps the next run's lease)
# What a worker may grow by reading a bomb's answer, over one that read a plain "ok": far under
# the 100 MiB the answer inflates to.
MAX_GROWTH_KIB = 32 * 1024


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with receiving(new_secret()) as found:
        yield found


def _worker(url: str, receiver: Receiver) -> subprocess.Popen[str]:
    env = {
        **os.environ,
        "XJOBS_E2E_URL": url,
        "XJOBS_E2E_RECEIVER": receiver.url,
        "XJOBS_E2E_SECRET": receiver.secret,
    }
    command = [sys.executable, "-m", "xjobs_cli", "worker", "webhook_app:app", "--lease", LEASE_S]
    return subprocess.Popen(
        command, cwd=HERE, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def _stop(process: subprocess.Popen[str]) -> None:
    process.send_signal(signal.SIGTERM)
    try:
        process.communicate(timeout=WAIT_S)
    except subprocess.TimeoutExpired:
        process.kill()
        _, err = process.communicate()
        pytest.fail(f"the worker did not exit within {WAIT_S}s of SIGTERM:\n{err}")


def _fail(process: subprocess.Popen[str], what: str) -> None:
    if process.poll() is None:
        process.kill()
    _, err = process.communicate()
    pytest.fail(f"{what}:\n{err}")


def _wait_for(what: str, ready: Callable[[], bool], process: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + WAIT_S
    while not ready():
        if process.poll() is not None:
            _fail(process, f"the worker exited {process.returncode} before {what}")
        if time.monotonic() > deadline:
            _fail(process, f"{what} did not happen within {WAIT_S}s")
        time.sleep(POLL_S)


def _handle() -> xjobs.JobHandle[WebhookEvent]:
    sys.path.insert(0, str(HERE))
    try:
        import webhook_app
    finally:
        sys.path.remove(str(HERE))
    return webhook_app.deliver


async def _enqueue(url: str, endpoint: str, message_id: str) -> str:
    handle = _handle()
    async with xjobs.App(backend=url, jobs=[handle]) as app:
        event = WebhookEvent(
            endpoint=endpoint, type="order.shipped", id=message_id, org_id="org-e2e"
        )
        return (await app.enqueue(handle, event)).job_id


async def _settled(url: str, job_id: str, process: subprocess.Popen[str]) -> xjobs.JobRecord:
    deadline = time.monotonic() + WAIT_S
    async with xjobs.App(backend=url) as app:
        while (record := await app.get_job(job_id)).live:
            if process.poll() is not None:
                _fail(process, f"the worker exited {process.returncode}, the job is {record.state}")
            if time.monotonic() > deadline:
                _fail(process, f"the job is still {record.state} after {WAIT_S}s")
            await asyncio.sleep(POLL_S)
    return record


async def _ledger(url: str, endpoint: str) -> list[WebhookAttempt]:
    async with xjobs.App(backend=url) as app:
        ledger = app.backend.webhooks
        assert ledger is not None
        return await ledger.attempts(endpoint)


@pytest.mark.asyncio
async def test_a_webhook_killed_mid_request_is_delivered_again_with_the_same_webhook_id(
    durable_url: str, receiver: Receiver
) -> None:
    job_id = await _enqueue(durable_url, "hang", "msg_killed_mid_request")
    first = _worker(durable_url, receiver)
    _wait_for("the first request", receiver.arrived.is_set, first)
    first.send_signal(signal.SIGKILL)
    first.communicate(timeout=WAIT_S)
    receiver.release.set()
    assert await _ledger(durable_url, "hang") == []  # the killed attempt was never recorded

    second = _worker(durable_url, receiver)
    try:
        record = await _settled(durable_url, job_id, second)
    finally:
        _stop(second)
    assert (record.state, record.attempt) == ("completed", 2)
    assert receiver.seen == [
        ("/hang", "msg_killed_mid_request", True),
        ("/hang", "msg_killed_mid_request", True),
    ]
    (delivered,) = await _ledger(durable_url, "hang")
    assert (delivered.status, delivered.http_status, delivered.attempt, delivered.job_id) == (
        "delivered",
        200,
        2,
        job_id,
    )


@pytest.mark.asyncio
async def test_a_503_is_recorded_and_retried_and_a_410_is_terminal(
    durable_url: str, receiver: Receiver
) -> None:
    flaky = await _enqueue(durable_url, "flaky", "msg_flaky")
    gone = await _enqueue(durable_url, "gone", "msg_gone")
    worker = _worker(durable_url, receiver)
    try:
        delivered = await _settled(durable_url, flaky, worker)
        rejected = await _settled(durable_url, gone, worker)
    finally:
        _stop(worker)
    assert (delivered.state, delivered.attempt) == ("completed", 2)
    assert (rejected.state, rejected.attempt) == ("dead", 1)
    assert "XJOBS_WEBHOOK_REJECTED" in (rejected.last_error or "")
    flaky_rows = await _ledger(durable_url, "flaky")
    assert [(a.status, a.http_status, a.attempt) for a in flaky_rows] == [
        ("delivered", 200, 2),
        ("failed", 503, 1),
    ]
    assert {a.message_id for a in flaky_rows} == {"msg_flaky"}
    (gone_row,) = await _ledger(durable_url, "gone")
    assert (gone_row.status, gone_row.http_status) == ("rejected", 410)
    assert all(verified for _, _, verified in receiver.seen)


def _peak_rss_kib(process: subprocess.Popen[str]) -> int:
    """The process's peak resident set so far (Linux `VmHWM`), in KiB."""
    status = Path(f"/proc/{process.pid}/status").read_text()
    (line,) = (line for line in status.splitlines() if line.startswith("VmHWM:"))
    return int(line.split()[1])


async def _delivered_by_a_worker(url: str, receiver: Receiver, endpoint: str) -> tuple[str, int]:
    """One event to `endpoint` through a fresh worker: the job id and the worker's peak RSS."""
    job_id = await _enqueue(url, endpoint, f"msg_{endpoint}_peak")
    worker = _worker(url, receiver)
    try:
        record = await _settled(url, job_id, worker)
        peak = _peak_rss_kib(worker)
    finally:
        _stop(worker)
    assert (record.state, record.attempt) == ("completed", 1)
    return job_id, peak


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads Linux /proc")
@pytest.mark.asyncio
async def test_a_decompression_bomb_is_recorded_and_never_inflated_in_the_worker(
    durable_url: str, receiver: Receiver
) -> None:
    _, plain = await _delivered_by_a_worker(durable_url, receiver, "ok")
    job_id, bombed = await _delivered_by_a_worker(durable_url, receiver, "bomb")
    assert bombed - plain < MAX_GROWTH_KIB
    (attempt,) = await _ledger(durable_url, "bomb")
    assert (attempt.job_id, attempt.status, attempt.http_status) == (job_id, "delivered", 200)
    assert attempt.excerpt == "[not read: Content-Encoding 'gzip, gzip']"
