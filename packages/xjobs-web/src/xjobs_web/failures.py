"""Failures grouped by error class and message: the newest failed and dead jobs, read a page at a time."""

from __future__ import annotations

from dataclasses import dataclass, field

from xjobs import JobFilter, Operator
from xjobs.contract.introspection import MAX_JOB_PAGE, JobSummary

SCAN_JOBS = 1000


@dataclass(slots=True)
class FailureGroup:
    """The jobs whose last error has one class and message."""

    error_class: str
    message: str
    ids: list[str] = field(default_factory=list)
    names: set[str] = field(default_factory=set)
    newest_ms: int = 0
    sample: str = ""


def split_error(text: str | None) -> tuple[str, str]:
    """The class and message of a stored error's first line (`Class: message`)."""
    head = (text or "").split("\n", 1)[0]
    if ": " in head:
        cls, message = head.split(": ", 1)
        return cls, message
    return head or "(no error recorded)", ""


def group(jobs: list[JobSummary]) -> list[FailureGroup]:
    """Group jobs by their last error's class and message, the largest group first."""
    groups: dict[tuple[str, str], FailureGroup] = {}
    for job in jobs:
        key = split_error(job.last_error)
        found = groups.get(key)
        if found is None:
            found = groups[key] = FailureGroup(*key, sample=job.id)
        found.ids.append(job.id)
        found.names.add(job.name)
        found.newest_ms = max(found.newest_ms, job.updated_at_ms)
    return sorted(groups.values(), key=lambda g: (-len(g.ids), -g.newest_ms, g.error_class))


async def failures(op: Operator) -> tuple[list[FailureGroup], bool]:
    """The groups of the newest `SCAN_JOBS` failed or dead jobs `op` sees (a scoped operator: its
    tenant's), and whether older ones were left."""
    where = JobFilter(states=("failed", "dead"))
    jobs: list[JobSummary] = []
    after = None
    while True:
        page = await op.list_jobs(
            where, limit=min(MAX_JOB_PAGE, SCAN_JOBS - len(jobs)), after=after
        )
        jobs.extend(page.jobs)
        if page.cursor is None:
            return group(jobs), False
        if len(jobs) >= SCAN_JOBS:
            return group(jobs), True
        after = page.cursor
