"""Waiting for a job's result: read it, or wait for the backend's settle hint, until a deadline."""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

from xjobs.codec import decode_result, return_annotation
from xjobs.contract.results import ResultStore, StoredResult
from xjobs.errors import (
    JobCancelledError,
    JobFailedError,
    JobNotFoundError,
    ResultTimeoutError,
)
from xjobs.options import duration_ms

DEFAULT_RESULT_TIMEOUT = timedelta(seconds=30)
# A single wait never outlasts this: the caller reads again, so a missed hint costs at most it.
MAX_WAIT_SLICE_MS = 1000


def _answer(job_id: str, stored: StoredResult, fn: Any) -> tuple[bool, Any]:
    """(finished, value): the decoded result of a completed job, or the refusal of another ending."""
    if stored.state == "completed":
        if stored.result is None:
            return True, None
        return True, decode_result(stored.result, return_annotation(fn), step="result")
    if stored.state in ("dead", "failed"):
        head = (stored.last_error or "").split("\n", 1)[0]
        error_class, _, message = head.partition(": ")
        raise JobFailedError(
            f"job {job_id} ended {stored.state}: {head or 'no error recorded'}",
            error_class=error_class,
            error_message=message,
        )
    if stored.state == "cancelled":
        raise JobCancelledError(f"job {job_id} was cancelled; it has no result")
    return False, None


async def wait_for_result(
    store: ResultStore, fn: Any, job_id: str, within: timedelta | None
) -> Any:
    """The value a job's body returned (decoded through its return annotation), waiting up to
    `within` (default 30 s) for the job to settle."""
    budget_ms = duration_ms("timeout", within if within is not None else DEFAULT_RESULT_TIMEOUT)
    deadline = time.monotonic() + budget_ms / 1000
    while True:
        stored = await store.read(job_id)
        if stored is None:
            raise JobNotFoundError(f"no job has id {job_id!r}")
        finished, value = _answer(job_id, stored, fn)
        if finished:
            return value
        left_ms = int((deadline - time.monotonic()) * 1000)
        if left_ms <= 0:
            raise ResultTimeoutError(
                f"job {job_id} is still {stored.state} after {budget_ms} ms; its result may come later"
            )
        await store.wait(job_id, min(left_ms, MAX_WAIT_SLICE_MS))
