"""A run's steps as a timeline: each step's kind (run, sleep, wait), status, and whether a later
execution of the body replayed it (answered it from its record instead of running it again)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from xjobs import JobRecord, StepRecord
from xjobs.contract.introspection import AttemptError
from xjobs.operate.timefmt import iso


@dataclass(frozen=True, slots=True)
class TimelineStep:
    """One step as the detail page shows it."""

    position: int
    name: str
    kind: str
    status: str
    at_ms: int
    replayed: bool
    detail: str


def _json(text: str | None) -> Any:
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text


def step_kind(step: StepRecord) -> str:
    """`sleep` (its record is the wake time), `wait` (an event wait's state or outcome), else `run`."""
    value = _json(step.result)
    if isinstance(value, dict):
        keys = set(value)
        if keys == {"wake_at_ms"}:
            return "sleep"
        if keys in ({"event_id", "payload"}, {"event", "match", "since_ms", "deadline_ms"}):
            return "wait"
    return "wait" if step.status == "pending" else "run"


def _detail(step: StepRecord, kind: str) -> str:
    if step.error is not None:
        return step.error.split("\n", 1)[0]
    value = _json(step.result)
    if kind == "sleep" and isinstance(value, dict):
        return f"wakes at {iso(int(value['wake_at_ms']))}"
    if kind == "wait" and isinstance(value, dict) and "event" in value:
        return f"waiting for {value['event']}"
    return json.dumps(value)[:200]


def _boundaries(steps: list[StepRecord], errors: list[AttemptError]) -> list[int]:
    """Instants after which the body ran again from the start: each attempt's end, and each
    sleep or wait that suspended the run."""
    marks = [e.at_ms for e in errors]
    marks += [s.created_at_ms for s in steps if step_kind(s) in ("sleep", "wait")]
    return sorted(marks)


def timeline(
    record: JobRecord, steps: list[StepRecord], errors: list[AttemptError]
) -> list[TimelineStep]:
    """The steps by position; a step is `replayed` when an execution began after it was recorded
    (a boundary after it, and activity after that boundary: a later step, error or the finish)."""
    activity = [s.created_at_ms for s in steps] + [e.at_ms for e in errors]
    if record.finished_at_ms is not None:
        activity.append(record.finished_at_ms)
    latest = max(activity, default=0)
    marks = _boundaries(steps, errors)
    out = []
    for step in sorted(steps, key=lambda s: s.position):
        kind = step_kind(step)
        replayed = any(step.created_at_ms <= m < latest for m in marks)
        out.append(
            TimelineStep(
                position=step.position,
                name=step.name,
                kind=kind,
                status=step.status,
                at_ms=step.created_at_ms,
                replayed=replayed,
                detail=_detail(step, kind),
            )
        )
    return out
