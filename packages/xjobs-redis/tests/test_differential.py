"""Redis against the memory reference: random operation sequences, every answer and row compared.

Both backends get the same rows (same ids) on the same manual clock; after every step the
answers must be equal and so must every stored job. The operator surface is in the mix: pauses,
promote and remove, the bulk verbs, and after every step of theirs the list, the queue counts,
the counters and the attempt errors are compared too. The parity suite pins each rule alone; this
pins how they compose.
"""

from __future__ import annotations

import random
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from xjobs.clock import ManualClock
from xjobs.contract.backend import Backend
from xjobs.contract.driver import (
    Claim,
    ClaimOptions,
    Nack,
    NackState,
    NewJob,
    Outcome,
)
from xjobs.contract.introspection import JobFilter, JobIntrospection
from xjobs.errors import XJobsError
from xjobs.ids import new_id
from xjobs.memory.plugin import test_backend as memory_backend
from xjobs_redis.testing import test_backend as redis_backend

QUEUES = ("alpha", "beta")
# A job's queue is declared with its name, so a namespace never spans two queues (on Redis the
# namespace is per queue: the README's known difference).
QUEUE_OF = {"first_job": "alpha", "second_job": "beta"}
WORKERS = ("w-1", "w-2")
STEPS = 250
# Each next state a nack stores, with an outcome the settle room names it by.
NACK_OUTCOMES: dict[NackState, Outcome] = {
    "ready": "retried",
    "waiting": "suspended",
    "dead": "dead-lettered",
    "failed": "dropped",
}


@asynccontextmanager
async def both(clock: ManualClock) -> AsyncIterator[tuple[Backend, Backend]]:
    async with memory_backend(clock) as memory, redis_backend(clock) as redis:
        yield memory, redis


def new_job(rng: random.Random, now: int) -> NewJob:
    delay = rng.choice([None, None, None, 0, 500, 2_000])
    name = rng.choice(sorted(QUEUE_OF))
    return NewJob(
        id=new_id(),
        run_id=new_id(),
        name=name,
        queue=QUEUE_OF[name],
        tenant_id=rng.choice([None, "", "org-1"]),
        idempotency_key=f"k-{rng.randrange(6)}",
        payload='{"n": 1}',
        priority=rng.randrange(3),
        run_at_ms=None if delay is None else now + delay,
        max_attempts=rng.randrange(1, 4),
        dead_letter=rng.random() < 0.7,
        enqueued_by=rng.choice([None, "user-1"]),
        traceparent=None,
    )


def ops(backend: Backend) -> JobIntrospection:
    assert backend.introspection is not None
    return backend.introspection


async def answer(backend: Backend, op: str, args: Any) -> Any:
    """What one operation answers: its value, or the code of the refusal it raised."""
    jobs = backend.jobs
    calls: dict[str, Any] = {
        "enqueue": lambda: jobs.enqueue(args),
        "claim": lambda: jobs.claim(args),
        "ack": lambda: jobs.ack(args),
        "nack": lambda: jobs.nack(*args),
        "heartbeat": lambda: jobs.heartbeat(args, 1_000),
        "progress": lambda: jobs.record_progress(args, 0.5),
        "cancel": lambda: jobs.cancel(args, "asked"),
        "requeue": lambda: jobs.requeue(args),
        "promote": lambda: ops(backend).promote(args),
        "remove": lambda: ops(backend).remove(args),
        "pause": lambda: ops(backend).pause(*args),
        "resume": lambda: ops(backend).resume(*args),
        "cancel_many": lambda: ops(backend).cancel_many(args[0], args[1], "bulk"),
        "retry_many": lambda: ops(backend).retry_many(*args),
        "promote_many": lambda: ops(backend).promote_many(*args),
        "remove_many": lambda: ops(backend).remove_many(*args),
        "rollup": lambda: ops(backend).rollup_counters(args),
    }
    try:
        return await calls[op]()
    except XJobsError as exc:
        return exc.code


async def views(backend: Backend, clock: ManualClock, ids: list[str]) -> list[Any]:
    """What an operator reads: pages of the list, the queues, the counters, errors and pauses."""
    view = ops(backend)
    found: list[Any] = []
    for where in (
        JobFilter(),
        JobFilter(states=("ready", "waiting")),
        JobFilter(states=("running",)),
        JobFilter(states=("dead", "failed", "cancelled"), name="first_job"),
        JobFilter(queue="beta", tenant="org-1"),
    ):
        page = await view.list_jobs(where, limit=7, after=None)
        found.append(page)
        if page:
            found.append(await view.list_jobs(where, limit=50, after=page[-1].position))
    found.append(await view.queues(clock.now_ms()))
    for tier in ("minute", "hour", "day"):
        found.append(await view.counters(tier, 0))
    found.append(await view.pauses())
    found += [await view.errors(job_id) for job_id in ids[-5:]]
    return found


def step(
    rng: random.Random, clock: ManualClock, ids: list[str], claims: list[Claim]
) -> tuple[str, Any]:
    """One random operation and its arguments (the same for both backends)."""
    roll = rng.random()
    if roll < 0.22 or not ids:
        return "enqueue", [new_job(rng, clock.now_ms()) for _ in range(rng.randrange(1, 4))]
    if roll < 0.45:
        asks = {q: rng.randrange(0, 3) for q in QUEUES if rng.random() < 0.8} or {"alpha": 1}
        limit = rng.choice([None, None, 1, 2])
        return "claim", ClaimOptions(rng.choice(WORKERS), asks, 1_000, limit=limit)
    if roll < 0.75 and claims:
        claim = rng.choice(claims)
        if rng.random() < 0.3:
            claim = Claim(claim.job_id, claim.worker_id, claim.claims)  # built by hand: no queue
        kind = rng.choice(["ack", "nack", "nack", "heartbeat", "progress"])
        if kind != "nack":
            return kind, claim
        state = rng.choice(sorted(NACK_OUTCOMES))
        nack = Nack(
            state=state,
            outcome=NACK_OUTCOMES[state],
            run_at_ms=rng.choice([None, clock.now_ms() + rng.choice([0, 300, 1_500])]),
            error=rng.choice([None, "boom"]),
            counts_as_attempt=rng.random() < 0.6,
        )
        return "nack", (claim, nack)
    if roll < 0.82:
        return rng.choice(["cancel", "requeue", "promote", "remove"]), rng.choice([*ids, new_id()])
    if roll < 0.87:
        kind = rng.choice(["queue", "job"])
        name = rng.choice(QUEUES if kind == "queue" else sorted(QUEUE_OF))
        return rng.choice(["pause", "resume"]), (kind, name)
    if roll < 0.89:
        return "rollup", clock.now_ms()
    op = rng.choice(["retry_many", "cancel_many", "promote_many", "remove_many"])
    pool = {
        "retry_many": ["dead", "failed", "cancelled"],
        "remove_many": ["dead", "failed", "cancelled", "completed"],
        "cancel_many": ["ready", "running", "waiting"],
        "promote_many": ["ready", "waiting"],
    }[op]
    states = tuple(rng.sample(pool, rng.randrange(0, len(pool) + 1)))
    where = JobFilter(
        states=states,  # type: ignore[arg-type]
        queue=rng.choice([None, *QUEUES]),
        name=rng.choice([None, "first_job"]),
        tenant=rng.choice([None, None, "org-1"]),
    )
    return op, (where, rng.randrange(0, 4))


def touched(op: str, args: Any, got: Any) -> list[str]:
    """The jobs one operation may have written (a bulk requeue is checked with the full sweep)."""
    if op == "enqueue":
        return [job.id for job in args]
    if op == "claim":
        return [job.id for job in (*got.jobs, *got.buried)]
    if op == "nack":
        return [args[0].job_id]
    if op in ("ack", "heartbeat", "progress"):
        return [args.job_id]
    if op in ("cancel", "requeue", "promote", "remove"):
        return [args]
    return []


@pytest.mark.asyncio
@pytest.mark.parametrize("seed", range(6))
async def test_redis_answers_and_stores_what_memory_does(seed: int) -> None:
    rng = random.Random(seed)
    clock = ManualClock()
    async with both(clock) as (memory, redis):
        ids: list[str] = []
        claims: list[Claim] = []
        for n in range(STEPS):
            op, args = step(rng, clock, ids, claims)
            expected = await answer(memory, op, args)
            got = await answer(redis, op, args)
            assert got == expected, f"step {n}: {op}({args!r})"
            if op == "enqueue":
                ids.extend(job.id for job in args)
            if op == "claim":
                claims.extend(job.claim for job in got.jobs)
            for job_id in ids if n % 10 == 0 else touched(op, args, got):
                assert await redis.jobs.get(job_id) == await memory.jobs.get(job_id), (
                    f"step {n}: {op}({args!r}) left job {job_id} different"
                )
            if n % 5 == 0 or op not in ("enqueue", "claim", "ack", "heartbeat", "progress"):
                assert await views(redis, clock, ids) == await views(memory, clock, ids), (
                    f"step {n}: {op}({args!r}) left the operator's view different"
                )
            clock.advance(rng.choice([0, 0, 10, 400, 1_001]))
        for job_id in ids:
            assert await redis.jobs.get(job_id) == await memory.jobs.get(job_id), job_id
