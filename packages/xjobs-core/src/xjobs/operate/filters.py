"""An operator's filter checked at the door: known states, valid names, a sane range, a bounded limit."""

from __future__ import annotations

from collections.abc import Iterable

from xjobs.contract.driver import JOB_STATES, JobState
from xjobs.contract.introspection import MAX_BULK_BATCH, MAX_JOB_PAGE, JobFilter
from xjobs.errors import FilterInvalidError, JobPageInvalidError, XJobsError
from xjobs.names import validate_queue

MAX_NAME_CHARS = 200


def job_filter(
    *,
    states: Iterable[str] = (),
    queue: str | None = None,
    name: str | None = None,
    tenant: str | None = None,
    created_after_ms: int | None = None,
    created_before_ms: int | None = None,
) -> JobFilter:
    """A `JobFilter` from loose values, each checked; a bad one is `XJOBS_FILTER_INVALID`."""
    wanted: list[JobState] = []
    for state in states:
        if state not in JOB_STATES:
            raise FilterInvalidError(f"unknown state {state!r}; states are {', '.join(JOB_STATES)}")
        if state not in wanted:
            wanted.append(state)
    if queue is not None:
        try:
            validate_queue(queue)
        except XJobsError as exc:
            raise FilterInvalidError(f"queue filter: {exc.message}") from exc
    for label, value in (("name", name), ("tenant", tenant)):
        if value is not None and (not value or len(value) > MAX_NAME_CHARS or "\x00" in value):
            raise FilterInvalidError(
                f"{label} filter must be 1 to {MAX_NAME_CHARS} characters with no NUL"
            )
    for label, ms in (("created_after", created_after_ms), ("created_before", created_before_ms)):
        if ms is not None and (isinstance(ms, bool) or not isinstance(ms, int) or ms < 0):
            raise FilterInvalidError(f"{label} must be a non-negative epoch ms")
    if (
        created_after_ms is not None
        and created_before_ms is not None
        and created_after_ms >= created_before_ms
    ):
        raise FilterInvalidError("created_after must be before created_before")
    return JobFilter(
        tuple(sorted(wanted, key=JOB_STATES.index)),
        queue,
        name,
        tenant,
        created_after_ms,
        created_before_ms,
    )


def page_limit(limit: int) -> int:
    """A list page's size, 1 to `MAX_JOB_PAGE`."""
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_JOB_PAGE:
        raise JobPageInvalidError(f"a page holds 1 to {MAX_JOB_PAGE} jobs; asked for {limit!r}")
    return limit


def batch_limit(limit: int) -> int:
    """A bulk verb's batch, 1 to `MAX_BULK_BATCH`."""
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_BULK_BATCH:
        raise FilterInvalidError(
            f"a bulk verb moves 1 to {MAX_BULK_BATCH} jobs per call; asked for {limit!r}"
        )
    return limit
