"""`ResultStore`: what a job body returned, stored with its completion, and a waiter's wake-up.

A backend that declares the `results` capability implements it. A completion with a result is
ONE fenced write (state, finish time and result together); a body that returns `None` settles
through the plain `ack` and stores nothing extra.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from xjobs.contract.driver import Claim, JobState


@dataclass(frozen=True, slots=True)
class StoredResult:
    """A job's ending as a result waiter reads it: its state, its result JSON, its last error."""

    state: JobState
    result: str | None
    last_error: str | None


@runtime_checkable
class ResultStore(Protocol):
    """Results of completed jobs, and a hint that a watched job settled."""

    async def complete(self, claim: Claim, result: str) -> bool:
        """Settle the run `completed` storing `result` (JSON text): this IS an ack, the same fence,
        writes and `completed` count, with the result in the same atomic step; it tells the
        job's result waiters. Answers whether the fence held."""
        ...

    async def read(self, job_id: str) -> StoredResult | None:
        """The job's state, result and last error, or `None` for an unknown id."""
        ...

    async def wait(self, job_id: str, timeout_ms: int) -> None:
        """Return once the job may have settled (a notification), or after `timeout_ms` at most.

        A hint only: the caller reads again after it returns. The backend's own notification
        path (a push) makes it prompt; a backend without one waits out a short poll.
        """
        ...
