"""An operator move's answer read back: the moved job, or the one refusal its status names."""

from __future__ import annotations

from typing import Literal

from xjobs.contract.driver import JobMove, JobRecord
from xjobs.errors import (
    JobNotCancellableError,
    JobNotFoundError,
    JobNotRequeueableError,
    JobRequeueDuplicateError,
)


def moved(verb: Literal["cancel", "requeue"], job_id: str, move: JobMove) -> JobRecord:
    """The record of a move that was `done`; any other status raises its stable refusal."""
    if move.status == "done" and move.record is not None:
        return move.record
    if move.status == "missing":
        raise JobNotFoundError(f"no job has id {job_id!r}")
    if move.status == "finished":
        raise JobNotCancellableError(
            f"job {job_id} is already {move.state}; only a live job can be cancelled"
        )
    if move.status == "live":
        raise JobNotRequeueableError(
            f"job {job_id} is {move.state}; only a finished job can be requeued"
        )
    if move.status == "duplicate":
        raise JobRequeueDuplicateError(
            f"job {job_id} cannot be requeued: live job {move.holder or '(unknown)'} holds its "
            "idempotency key"
        )
    raise AssertionError(f"a {verb} answered {move.status!r} with no record")
