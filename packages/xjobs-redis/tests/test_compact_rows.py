"""The compact job HASH: a plain enqueue stores no column at its default, every reader fills the
defaults in, and a HASH the previous layout wrote (every column stored) still runs through."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from redis.asyncio import Redis

from xjobs.clock import ManualClock
from xjobs.contract.backend import Backend
from xjobs.contract.driver import Claim, ClaimOptions, NewJob
from xjobs.contract.introspection import JobFilter
from xjobs.testing import rows
from xjobs_redis.driver import RedisJobDriver
from xjobs_redis.keys import Keys
from xjobs_redis.rows import CLAIMED_FIELDS, JOB_DEFAULTS, SHORT_FIELDS, claimed_job, stored_columns
from xjobs_redis.scripts import LIBRARY, lua_names, read_lua

QUEUE = "compact"


def new_job(**overrides: Any) -> NewJob:
    return rows.new_job(**{"name": "compact_job", "queue": QUEUE, **overrides})


def keys_of(backend: Backend) -> Keys:
    driver = backend.jobs
    assert isinstance(driver, RedisJobDriver)
    return driver._k


def test_stored_columns_fill_the_defaults_and_a_missing_job_stays_missing() -> None:
    row = stored_columns({"created_at_ms": "7", "run_id": "r", "attempt": "2"}, "j", "q")
    assert row == {
        **JOB_DEFAULTS,
        "id": "j",
        "queue": "q",
        "run_at_ms": "7",
        "updated_at_ms": "7",
        "created_at_ms": "7",
        "run_id": "r",
        "attempt": "2",
    }
    assert stored_columns({"watch": "c"}, "j", "q") == {}


def test_a_short_field_wins_over_its_older_twin_in_either_order() -> None:
    for row in ({"p": "new", "payload": "old", "c": "1"}, {"payload": "old", "p": "new", "c": "1"}):
        assert stored_columns(row, "j", "q")["payload"] == "new"
    assert stored_columns({"name": "old_layout", "created_at_ms": "1"}, "j", "q")["name"] == (
        "old_layout"
    )


def test_a_claimed_job_is_read_in_the_claim_replys_field_order() -> None:
    # each field a value of its own, so a field read from the wrong place shows
    numbers = {"priority", "attempt", "max_attempts", "claims", "lease_until_ms", "created_at_ms"}
    reply = [
        str(10 + n) if field in numbers or field == "run_at_ms" else f"<{field}>"
        for n, field in enumerate(CLAIMED_FIELDS)
    ]
    reply[CLAIMED_FIELDS.index("dead_letter")] = "1"
    job, due_at_ms = claimed_job(json.dumps(reply), "w-1")
    assert due_at_ms == job.due_at_ms == 10 + CLAIMED_FIELDS.index("run_at_ms")
    assert job.worker_id == "w-1"
    assert job.dead_letter is True
    for n, field in enumerate(CLAIMED_FIELDS):
        if field in numbers:
            assert getattr(job, field) == 10 + n, field
        elif field not in ("dead_letter", "run_at_ms"):
            assert getattr(job, field) == f"<{field}>", field


@pytest.mark.asyncio
async def test_a_plain_enqueue_stores_only_what_differs_from_the_defaults(
    manual_backend: Backend, client: Redis
) -> None:
    job = new_job(max_attempts=int(JOB_DEFAULTS["max_attempts"]))  # the declarations' default
    await manual_backend.jobs.enqueue([job])
    stored = await client.hgetall(keys_of(manual_backend).job(QUEUE, job.id))
    assert stored == {
        "r": job.run_id,
        "n": job.name,
        "k": job.idempotency_key,
        "p": job.payload,
        "c": str(stored["c"]),
    }
    record = await manual_backend.jobs.get(job.id)
    assert record is not None
    assert (record.id, record.queue, record.state, record.attempt, record.claims) == (
        job.id,
        QUEUE,
        "ready",
        0,
        0,
    )
    assert (record.max_attempts, record.dead_letter, record.priority) == (
        job.max_attempts,
        job.dead_letter,
        job.priority,
    )
    assert record.run_at_ms == record.updated_at_ms == record.created_at_ms


@pytest.mark.asyncio
async def test_columns_off_their_defaults_are_stored_and_read_back(
    manual_backend: Backend, clock: ManualClock
) -> None:
    job = new_job(priority=3, max_attempts=2, dead_letter=False, run_at_ms=clock.now_ms() + 60_000)
    await manual_backend.jobs.enqueue([job])
    record = await manual_backend.jobs.get(job.id)
    assert record is not None
    assert (record.priority, record.max_attempts, record.dead_letter) == (3, 2, False)
    assert record.run_at_ms == clock.now_ms() + 60_000
    assert record.updated_at_ms == record.created_at_ms == clock.now_ms()


@pytest.mark.asyncio
async def test_a_job_hash_of_the_previous_layout_is_deduped_claimed_listed_and_acked(
    manual_backend: Backend, client: Redis, clock: ManualClock
) -> None:
    """Every column stored, as the layout before the compact HASH wrote it: a present field
    wins over its default, so the job reads, claims, lists and settles as before."""
    job = new_job()
    await manual_backend.jobs.enqueue([new_job(run_at_ms=clock.now_ms() + 60_000)])  # joined
    k, now = keys_of(manual_backend), clock.now_ms()
    key = k.job(QUEUE, job.id)
    await client.hset(
        key,
        mapping={
            "id": job.id,
            "run_id": job.run_id,
            "name": job.name,
            "queue": QUEUE,
            "idempotency_key": job.idempotency_key,
            "payload": job.payload,
            "priority": 0,
            "run_at_ms": now - 1,
            "max_attempts": 4,
            "dead_letter": "0",
            "created_at_ms": now - 1,
            "updated_at_ms": now - 1,
            "state": "ready",
            "attempt": 0,
            "claims": 0,
        },
    )
    await client.zadd(k.ready(QUEUE), {key: now - 1})
    namespace = f"{job.name}\x00{job.tenant_id or ''}\x00{job.idempotency_key}"
    await client.hset(k.live(QUEUE), namespace, key)

    (again,) = await manual_backend.jobs.enqueue([new_job(idempotency_key=job.idempotency_key)])
    assert (again.job_id, again.deduped) == (job.id, True)
    assert manual_backend.introspection is not None
    listed = await manual_backend.introspection.list_jobs(
        JobFilter(queue=QUEUE), limit=10, after=None
    )
    assert job.id in {summary.id for summary in listed}

    result = await manual_backend.jobs.claim(
        ClaimOptions(worker_id="w", queues={QUEUE: 1}, lease_ms=30_000)
    )
    (claimed,) = result.jobs
    assert (claimed.id, claimed.max_attempts, claimed.dead_letter) == (job.id, 4, False)
    assert (claimed.attempt, claimed.claims) == (1, 1)
    claim = Claim(job_id=job.id, worker_id="w", claims=1, queue=QUEUE, run_id=job.run_id)
    assert await manual_backend.jobs.ack(claim)
    record = await manual_backend.jobs.get(job.id)
    assert record is not None
    assert (record.state, record.attempt, record.max_attempts) == ("completed", 1, 4)


def test_the_short_names_are_the_scripts_own() -> None:
    library = read_lua(LIBRARY)
    table = library.split("local SHORT = {", 1)[1].split("}", 1)[0]
    assert dict(re.findall(r"(\w+) = '(\w+)'", table)) == SHORT_FIELDS
    assert len(set(SHORT_FIELDS.values())) == len(SHORT_FIELDS)
    assert not set(SHORT_FIELDS.values()) & set(JOB_DEFAULTS) - set(SHORT_FIELDS)


def test_no_script_writes_a_short_column_under_its_own_name() -> None:
    """lib's jread reads a HASH with `c` by its short fields alone: it holds no older twin only
    while every write of a short column uses the short field (the older layout's HASH has no `c`
    and is read with the twins)."""
    long_names = set(SHORT_FIELDS)
    for name in [LIBRARY, *lua_names()]:
        for line in read_lua(name).splitlines():
            if "'HSET'" in line or "'HSETNX'" in line or "'HMSET'" in line:
                written = set(re.findall(r"'(\w+)'", line)) & long_names
                assert not written, f"{name}.lua writes {sorted(written)} by its own name: {line}"
