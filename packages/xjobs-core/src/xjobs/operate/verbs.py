"""The operator's moves (cancel, retry, promote, remove) as the CLI and the dashboard both offer
them: the states each moves, how many a filter would move, and which errors are refusals."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from xjobs.contract.driver import BulkResult, JobRecord
from xjobs.contract.introspection import COUNT_CAP, MAX_JOB_PAGE, JobFilter, JobSummary
from xjobs.errors import XJobsError
from xjobs.operate.operator import Operator

# A refusal is the operator's to fix; these are the system's: retrying later may succeed.
FAILURE_CODES = frozenset({"XJOBS_BACKEND_UNAVAILABLE", "XJOBS_BACKEND_ERROR", "XJOBS_UNEXPECTED"})


def is_refusal(exc: XJobsError) -> bool:
    """Whether the input (or the verb) was refused, rather than the system failing."""
    return exc.code not in FAILURE_CODES


@dataclass(frozen=True, slots=True)
class Verb:
    """One move: its name, what it does, the states it moves, and how past tense reads.

    `one(op, job_id, reason)` moves one job; `many(op, where, limit, reason)` one batch (the reason
    is recorded by `cancel` only).
    """

    name: str
    help: str
    states: tuple[str, ...]
    done: str
    one: Callable[[Operator, str, str | None], Awaitable[JobRecord]]
    many: Callable[[Operator, JobFilter, int, str | None], Awaitable[BulkResult]]


LIVE = ("ready", "running", "waiting")
FINISHED = ("completed", "failed", "dead", "cancelled")

VERBS = (
    Verb(
        "cancel",
        "cancel live jobs (a running one stops at its next heartbeat)",
        LIVE,
        "cancelled",
        lambda op, job_id, reason: op.cancel(job_id, reason),
        lambda op, where, limit, reason: op.cancel_where(where, limit=limit, reason=reason),
    ),
    Verb(
        "retry",
        "requeue finished jobs now, attempts reset",
        FINISHED,
        "retried",
        lambda op, job_id, reason: op.retry(job_id),
        lambda op, where, limit, reason: op.retry_where(where, limit=limit),
    ),
    Verb(
        "promote",
        "make delayed or retrying jobs due now",
        ("ready",),
        "promoted",
        lambda op, job_id, reason: op.promote(job_id),
        lambda op, where, limit, reason: op.promote_where(where, limit=limit),
    ),
    Verb(
        "remove",
        "delete finished jobs with their steps and errors",
        FINISHED,
        "removed",
        lambda op, job_id, reason: op.remove(job_id),
        lambda op, where, limit, reason: op.remove_where(where, limit=limit),
    ),
)


def _movable(verb: Verb, job: JobSummary, now_ms: int) -> bool:
    if verb.name == "promote":
        return job.state == "ready" and job.run_at_ms > now_ms
    return job.state in verb.states


async def count(verb: Verb, op: Operator, where: JobFilter, now_ms: int) -> tuple[int, bool]:
    """How many jobs the verb would move now, scanning at most `COUNT_CAP` (then: at least)."""
    matched = scanned = 0
    after = None
    while True:
        page = await op.list_jobs(where, limit=MAX_JOB_PAGE, after=after)
        matched += sum(1 for j in page.jobs if _movable(verb, j, now_ms))
        scanned += len(page.jobs)
        if page.cursor is None:
            return matched, False
        if scanned >= COUNT_CAP:
            return matched, True
        after = page.cursor
