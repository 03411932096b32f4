"""The dashboard's moves: cancel, retry, promote and remove on ids (each reported) or on a filter,
counted before (the confirmation says how many) and moved in batches after, as `xjobs jobs` does."""

from __future__ import annotations

from dataclasses import dataclass, field

from xjobs import JobFilter, Operator, XJobsError
from xjobs.contract.introspection import MAX_BULK_BATCH, PauseKind
from xjobs.errors import FilterInvalidError
from xjobs.operate.filters import job_filter
from xjobs.operate.verbs import VERBS, Verb, count, is_refusal

BY_NAME: dict[str, Verb] = {v.name: v for v in VERBS}
REASON = "cancelled from the dashboard"


@dataclass(slots=True)
class MoveReport:
    """What a move did: how many moved, and the refusals by id (code and message)."""

    moved: int = 0
    remaining: int = 0
    refused: dict[str, str] = field(default_factory=dict)


def pause_kind(value: str | None) -> PauseKind:
    """A pause's kind, `queue` or `job`; anything else is `XJOBS_FILTER_INVALID`."""
    if value == "queue":
        return "queue"
    if value == "job":
        return "job"
    raise FilterInvalidError(f"a pause names a queue or a job; got {value!r}")


def verb_named(name: str) -> Verb:
    """The verb of a form's `verb` field; an unknown one is `XJOBS_FILTER_INVALID`."""
    verb = BY_NAME.get(name)
    if verb is None:
        raise FilterInvalidError(f"unknown action {name!r}; actions are {', '.join(BY_NAME)}")
    return verb


def narrowed(verb: Verb, where: JobFilter) -> JobFilter | None:
    """`where` with only the states the verb moves (all of them when it names none); `None` when
    it names only states the verb never moves."""
    states = tuple(s for s in where.states if s in verb.states) if where.states else verb.states
    if not states:
        return None
    return job_filter(
        states=states,
        queue=where.queue,
        name=where.name,
        tenant=where.tenant,
        created_after_ms=where.created_after_ms,
        created_before_ms=where.created_before_ms,
    )


async def move_ids(op: Operator, verb: Verb, ids: list[str]) -> MoveReport:
    """Move each id; a refused one is reported and the others are still moved."""
    report = MoveReport()
    for job_id in ids:
        try:
            await verb.one(op, job_id, REASON)
        except XJobsError as exc:
            if not is_refusal(exc):
                raise  # the backend failed: the ids after this one would fail the same way
            report.refused[job_id] = f"{exc.code}: {exc.message}"
        else:
            report.moved += 1
    return report


async def matched(op: Operator, verb: Verb, where: JobFilter, now_ms: int) -> tuple[int, bool]:
    """How many jobs the verb would move now (counted up to the cap; then "at least")."""
    return await count(verb, op, where, now_ms)


async def move_where(op: Operator, verb: Verb, where: JobFilter) -> MoveReport:
    """Move batches until none remain, at most the first batch's `moved + remaining` in all (so a
    move racing new jobs, or a retried job that dies again, still ends)."""
    report = MoveReport()
    ceiling: int | None = None
    while True:
        result = await verb.many(op, where, MAX_BULK_BATCH, REASON)
        report.moved += result.moved
        report.remaining = result.remaining
        if ceiling is None:
            ceiling = result.moved + result.remaining
        if result.remaining == 0 or result.moved == 0 or report.moved >= ceiling:
            return report
