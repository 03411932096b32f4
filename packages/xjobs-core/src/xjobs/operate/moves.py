"""An operator move's answer read back: the moved job, or the one refusal its status names."""

from __future__ import annotations

from typing import Literal

from xjobs.contract.driver import JobMove, JobRecord
from xjobs.errors import (
    JobNotCancellableError,
    JobNotFoundError,
    JobNotPromotableError,
    JobNotRemovableError,
    JobNotRequeueableError,
    JobRequeueDuplicateError,
    XJobsError,
)

Verb = Literal["cancel", "requeue", "promote", "remove"]


def _refusal(verb: Verb, job_id: str, move: JobMove) -> XJobsError:
    state = move.state
    if move.status == "missing":
        return JobNotFoundError(f"no job has id {job_id!r}")
    if verb == "cancel":
        return JobNotCancellableError(
            f"job {job_id} is already {state}; only a live job can be cancelled"
        )
    if verb == "requeue" and move.status == "duplicate":
        return JobRequeueDuplicateError(
            f"job {job_id} cannot be requeued: live job {move.holder or '(unknown)'} holds its "
            "idempotency key"
        )
    if verb == "requeue":
        return JobNotRequeueableError(
            f"job {job_id} is {state}; only a finished job can be requeued"
        )
    if verb == "promote":
        return JobNotPromotableError(
            f"job {job_id} is {state}; only a ready (delayed or retrying) job can be promoted"
        )
    return JobNotRemovableError(f"job {job_id} is {state}; only a finished job can be removed")


def moved(verb: Verb, job_id: str, move: JobMove) -> JobRecord:
    """The record of a move that was `done`; any other status raises its stable refusal."""
    if move.status == "done" and move.record is not None:
        return move.record
    raise _refusal(verb, job_id, move)
