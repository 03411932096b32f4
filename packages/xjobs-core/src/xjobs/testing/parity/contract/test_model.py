"""Parity: a Hypothesis state machine drives the job-driver contract in random order and checks the
driver against the reference model (`model.py`) after every step (semantics.md, "Claims, leases and settlement")."""

from __future__ import annotations

import asyncio
import dataclasses
import os
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, TypeVar

import pytest

from xjobs.contract.driver import JOB_STATES, Claim, ClaimOptions, JobRecord, Nack
from xjobs.contract.introspection import JobFilter
from xjobs.ids import new_id
from xjobs.run.settle import ending, parking, retrying, shedding
from xjobs.testing.parity.contract.model import ContractModel
from xjobs.testing.rows import new_job

# hypothesis is a test dependency (the parity sessions install it), not one of xjobs-core's.
pytest.importorskip("hypothesis", reason="the model test needs hypothesis installed")

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

if TYPE_CHECKING:
    from xjobs.clock import ManualClock
    from xjobs.contract.backend import Backend
    from xjobs.contract.introspection import JobIntrospection
    from xjobs.testing.parity.env import ParityEnv

pytestmark = pytest.mark.xjobs_parity

T = TypeVar("T")

# `XJOBS_MODEL_PROFILE=xjobs-model-long` (nox -s model-long) runs many more and longer examples.
settings.register_profile(
    "xjobs-model",
    max_examples=40,
    stateful_step_count=30,
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
)
settings.register_profile(
    "xjobs-model-long",
    parent=settings.get_profile("xjobs-model"),
    max_examples=2_000,
    stateful_step_count=60,
)
PROFILE = os.environ.get("XJOBS_MODEL_PROFILE", "xjobs-model")

STEP_TIMEOUT_S = 30
KEYS = ("k0", "k1")
WORKERS = ("w1", "w2")
LEASES_MS = (1_000, 5_000)
DELAYS_MS = (0, 500, 5_000)
SETTLES = ("heartbeat", "ack", "retry", "fail", "park", "shed", "forged-worker", "forged-claims")
MISSING_ID = "0190aaaa-0000-7000-8000-000000000000"
# (idempotency key, priority, delay ms, max attempts, dead letter)
JobSpec = tuple[str, int, int, int, bool]
JOB_SPECS = st.tuples(
    st.sampled_from(KEYS),
    st.integers(0, 2),
    st.sampled_from(DELAYS_MS),
    st.integers(1, 2),
    st.booleans(),
)


@dataclass
class World:
    """The backend under test, its manual clock, and the event loop every step runs in."""

    runner: asyncio.Runner
    backend: Backend
    clock: ManualClock

    def run(self, step: Awaitable[T]) -> T:
        async def bounded() -> T:
            async with asyncio.timeout(STEP_TIMEOUT_S):
                return await step

        return self.runner.run(bounded())


class ContractMachine(RuleBasedStateMachine):
    """One example: a fresh queue, name and keys on the shared backend, checked against a fresh model."""

    world: ClassVar[World]

    def __init__(self) -> None:
        super().__init__()
        self.model = ContractModel()
        self.queue = f"model-{new_id()}"
        self.name = f"model_{new_id()}"
        self.tokens: set[tuple[str, int]] = set()
        self.issued: list[Claim] = []

    @property
    def now(self) -> int:
        return self.world.clock.now_ms()

    def get(self, job_id: str) -> JobRecord | None:
        return self.world.run(self.world.backend.jobs.get(job_id))

    @initialize(specs=st.lists(JOB_SPECS, min_size=2, max_size=4))
    def seed(self, specs: list[JobSpec]) -> None:
        for spec in specs:
            self.enqueue(spec)

    @rule(spec=JOB_SPECS)
    def enqueue(self, spec: JobSpec) -> None:
        key, priority, delay, max_attempts, dead_letter = spec
        new = new_job(
            name=self.name,
            queue=self.queue,
            idempotency_key=key,
            priority=priority,
            run_at_ms=self.now + delay if delay else None,
            max_attempts=max_attempts,
            dead_letter=dead_letter,
        )
        (answer,) = self.world.run(self.world.backend.jobs.enqueue([new]))
        expected, deduped = self.model.enqueue(new, self.now)
        assert (answer.job_id, answer.deduped) == (expected, deduped)

    @rule(plan=st.tuples(st.sampled_from(WORKERS), st.integers(1, 3), st.sampled_from(LEASES_MS)))
    def claim(self, plan: tuple[str, int, int]) -> None:
        worker, n, lease_ms = plan
        now = self.now
        options = ClaimOptions(worker_id=worker, queues={self.queue: n}, lease_ms=lease_ms)
        result = self.world.run(self.world.backend.jobs.claim(options))
        assert {b.id for b in result.buried} == self.model.bury(now)
        candidates = self.model.candidates(now)
        taken = [j.id for j in result.jobs]
        assert len(set(taken)) == len(taken), f"one claim handed a job out twice: {taken}"
        assert len(taken) == min(n, len(candidates))
        by_id = {c.id: c for c in candidates}
        assert set(taken) <= set(by_id), f"claimed {taken}, claimable {list(by_id)}"
        left = [c.order for c in candidates if c.id not in set(taken)]
        assert all(by_id[i].order <= min(left, default=by_id[i].order) for i in taken)
        for claimed in result.jobs:
            job = self.model.claimed(claimed.id, worker, now, lease_ms)
            seen = (claimed.attempt, claimed.claims, claimed.worker_id, claimed.lease_until_ms)
            assert seen == (job.attempt, job.claims, worker, job.lease_until_ms)
            token = (claimed.id, claimed.claims)
            assert token not in self.tokens, f"the fencing token {token} was handed out twice"
            self.tokens.add(token)
            self.issued.append(claimed.claim)

    @precondition(lambda self: bool(self.issued))
    @rule(
        plan=st.tuples(
            st.integers(0, 255),
            st.sampled_from(SETTLES),
            st.sampled_from(LEASES_MS),
            st.sampled_from(DELAYS_MS),
        )
    )
    def settle(self, plan: tuple[int, str, int, int]) -> None:
        """A write under one claim handed out so far (the latest first): live, stale or forged."""
        pick, action, lease_ms, delay = plan
        claim = self.issued[-1 - pick % len(self.issued)]
        jobs = self.world.backend.jobs
        if action == "heartbeat":
            if self.fenced(claim, jobs.heartbeat(claim, lease_ms)):
                self.model.heartbeat(claim.job_id, self.now, lease_ms)
        elif action == "ack":
            if self.fenced(claim, jobs.ack(claim)):
                self.model.ack(claim.job_id)
        elif action.startswith("forged"):
            forged = (
                dataclasses.replace(claim, worker_id="intruder")
                if action == "forged-worker"
                else dataclasses.replace(claim, claims=claim.claims + 1)
            )
            if self.fenced(forged, jobs.ack(forged)):  # a forgery may name the live claim
                self.model.ack(claim.job_id)
        else:
            nack = self.decided(claim, action, self.now + delay)
            if self.fenced(claim, jobs.nack(claim, nack)):
                self.model.nack(claim.job_id, nack, self.now)

    def fenced(self, claim: Claim, write: Awaitable[bool]) -> bool:
        """Run a fenced write; a miss (the model says the fence broke) must change nothing."""
        holds = self.model.holds(claim)
        before = None if holds else self.get(claim.job_id)
        landed = self.world.run(write)
        assert landed is holds, f"the fence answered {landed}, the model says {holds}"
        if not holds:
            assert self.get(claim.job_id) == before, "a fenced-out write changed the job"
        return holds

    def decided(self, claim: Claim, kind: str, at: int) -> Nack:
        """The nack the settle room would write: a retry on the final attempt ends the job."""
        job = self.model.jobs[claim.job_id]
        if kind == "retry" and job.attempt < job.max_attempts:
            return retrying("boom", at)
        if kind in ("retry", "fail"):
            return ending(job.dead_letter, "boom")
        return parking(at) if kind == "park" else shedding(at)

    @rule(plan=st.tuples(st.integers(0, 255), st.sampled_from(("cancel", "requeue"))))
    def move(self, plan: tuple[int, str]) -> None:
        """An operator's cancel or requeue of one of the run's jobs, or of a missing one."""
        pick, verb = plan
        ids = [*self.model.jobs, MISSING_ID]
        job_id = ids[pick % len(ids)]
        if verb == "cancel":
            move = self.world.run(self.world.backend.jobs.cancel(job_id))
            assert move.status == self.model.cancel(job_id)
        else:
            move = self.world.run(self.world.backend.jobs.requeue(job_id))
            assert move.status == self.model.requeue(job_id, self.now)

    @rule(ms=st.sampled_from((1, 1_000, 5_000)))
    def advance(self, ms: int) -> None:
        self.world.clock.advance(ms)

    @invariant()
    def every_job_agrees(self) -> None:
        for job in self.model.jobs.values():
            record = self.get(job.id)
            assert record is not None, f"job {job.id} is gone"
            seen = (record.state, record.attempt, record.claims)
            assert seen == (job.state, job.attempt, job.claims), f"{job}: driver {seen}"
            if job.state == "running":
                assert (record.claimed_by, record.lease_until_ms) == (
                    job.claimed_by,
                    job.lease_until_ms,
                ), f"{job}: driver {record}"
            if job.state in ("ready", "waiting"):
                assert record.run_at_ms == job.run_at_ms, f"{job}: driver {record}"

    def teardown(self) -> None:
        """Once per example (they cost a query per state): the state indexes and the counts."""
        ops = self.world.backend.introspection
        if ops is None or not self.model.jobs:
            return
        self.each_job_is_in_one_state(ops)
        self.counts_agree(ops)

    def each_job_is_in_one_state(self, ops: JobIntrospection) -> None:
        listed: list[str] = []
        for state in JOB_STATES:
            where = JobFilter(states=(state,), queue=self.queue)
            page = self.world.run(ops.list_jobs(where, limit=100, after=None))
            assert all(s.state == state for s in page)
            listed.extend(s.id for s in page)
        assert sorted(listed) == sorted(self.model.jobs), "a job is listed in two states"

    def counts_agree(self, ops: JobIntrospection) -> None:
        now = self.now
        mine = [q for q in self.world.run(ops.queues(now)) if q.queue == self.queue]
        seen = {f: getattr(mine[0], f) if mine else 0 for f in self.model.counts(now)}
        assert seen == self.model.counts(now)


def machine_for(world: World) -> type[ContractMachine]:
    """The state machine bound to `world` (Hypothesis builds one instance per example)."""
    return type("BoundContractMachine", (ContractMachine,), {"world": world})


def test_the_driver_agrees_with_the_reference_model(parity: ParityEnv) -> None:
    """Rule: in any order of enqueue, claim, heartbeat, ack, nack, cancel, requeue and lease expiry,
    a driver moves each job as the reference model does, fences out every stale or forged claim
    without a write, and never hands out one fencing token twice."""
    with asyncio.Runner() as runner:
        opening = parity.factory.open_test_backend(parity.clock)
        backend = runner.run(opening.__aenter__())
        failure: BaseException | None = None
        try:
            world = World(runner, backend, parity.clock)
            run_state_machine_as_test(machine_for(world), settings=settings.get_profile(PROFILE))
        except BaseException as exc:
            failure = exc
            raise
        finally:
            kind = None if failure is None else type(failure)
            tb = None if failure is None else failure.__traceback__
            runner.run(opening.__aexit__(kind, failure, tb))
