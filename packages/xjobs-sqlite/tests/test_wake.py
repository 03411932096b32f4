"""The wake across processes: a commit on another connection wakes a listening worker within milliseconds."""

from __future__ import annotations

import asyncio

import pytest

from xjobs.clock import ManualClock
from xjobs.testing.rows import new_job
from xjobs_sqlite.backend import open_backend


@pytest.mark.asyncio
async def test_an_enqueue_on_another_connection_wakes_a_listener(db_url: str) -> None:
    listening = await open_backend(db_url, clock=ManualClock())
    enqueuing = await open_backend(db_url, clock=ManualClock())
    woken = asyncio.Event()
    try:
        assert listening.wake is not None
        listening.wake.subscribe(lambda _queue: woken.set())
        await asyncio.wait_for(woken.wait(), 5)  # the first poll: its reading is the baseline
        woken.clear()
        assert listening.wake.live
        await enqueuing.jobs.enqueue([new_job(queue="q")])
        await asyncio.wait_for(woken.wait(), 5)
    finally:
        await enqueuing.close()
        await listening.close()


@pytest.mark.asyncio
async def test_a_process_s_own_enqueue_wakes_its_listener_of_that_queue(db_url: str) -> None:
    backend = await open_backend(db_url, clock=ManualClock())
    woken: list[str | None] = []
    try:
        assert backend.wake is not None
        backend.wake.subscribe(woken.append)
        await backend.jobs.enqueue([new_job(queue="q")])
        assert "q" in woken  # told by the enqueue itself, not by a later poll
    finally:
        await backend.close()


@pytest.mark.asyncio
async def test_a_commit_before_the_first_poll_is_not_missed(db_url: str) -> None:
    listening = await open_backend(db_url, clock=ManualClock())
    enqueuing = await open_backend(db_url, clock=ManualClock())
    woken = asyncio.Event()
    try:
        assert listening.wake is not None
        listening.wake.subscribe(lambda _queue: woken.set())
        await enqueuing.jobs.enqueue([new_job(queue="q")])  # before any poll could read
        await asyncio.wait_for(woken.wait(), 5)
    finally:
        await enqueuing.close()
        await listening.close()
