"""One job as an operator reads it: the record, input, key and step results through the job's `redact`.

Fails closed: a job this process does not declare shows its input, key and step results withheld.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from pydantic import BaseModel

from xjobs.contract.driver import JobRecord
from xjobs.contract.introspection import AttemptError
from xjobs.contract.stores import StepRecord
from xjobs.declare.job import JobHandle

# How the values of a `JobDetail` were shown: through declared hooks, as stored (the job declares
# none), or withheld (this process does not declare the job).
Redaction = Literal["applied", "none", "unknown-job"]

UNDECLARED = "<withheld: this process declares no job named {name!r}>"
HOOK_FAILED = "<withheld: redact.{hook} of job {name!r} raised or answered no JSON>"


@dataclass(frozen=True, slots=True)
class JobDetail:
    """`get_job`'s answer: `record` (its `idempotency_key` and `payload` as shown), `input` (the
    JSON value shown), `steps` (each result as shown), `errors`; `redaction` says how."""

    record: JobRecord
    input: Any
    steps: tuple[StepRecord, ...]
    errors: tuple[AttemptError, ...]
    redaction: Redaction = "none"


def job_detail(
    handle: JobHandle[Any] | None,
    record: JobRecord,
    steps: Sequence[StepRecord],
    errors: Sequence[AttemptError],
) -> JobDetail:
    """`record` and its steps as an operator may see them through `handle`'s `redact` hooks;
    `handle=None` (a job this process does not declare) withholds the input, key and results."""
    if handle is None:
        withheld = UNDECLARED.format(name=record.name)
        return JobDetail(
            _shown_record(record, withheld, withheld),
            withheld,
            tuple(_shown_step(s, withheld) for s in steps),
            tuple(errors),
            "unknown-job",
        )
    redact = handle.redact
    if not redact.declared:
        return JobDetail(record, json.loads(record.payload), tuple(steps), tuple(errors), "none")
    shown_input: Any = json.loads(record.payload)
    if redact.input is not None:
        input_hook, model = redact.input, handle.input_model
        shown_input = _through(
            lambda payload: input_hook(model.model_validate_json(payload)),
            (record.payload,),
            _failed("input", record),
        )
    key = record.idempotency_key
    if redact.key is not None:
        shown_key = _through(redact.key, (key,), _failed("key", record))
        key = shown_key if isinstance(shown_key, str) else _failed("key", record)
    shown_steps = tuple(steps)
    if redact.steps is not None:
        shown_steps = tuple(
            _shown_step(
                s,
                _through(
                    redact.steps, (s.name, json.loads(s.result or "null")), _failed("steps", record)
                ),
            )
            for s in steps
        )
    return JobDetail(
        _shown_record(record, key, shown_input), shown_input, shown_steps, tuple(errors), "applied"
    )


def _failed(hook: str, record: JobRecord) -> str:
    return HOOK_FAILED.format(hook=hook, name=record.name)


def _through(hook: Callable[..., object], args: tuple[Any, ...], withheld: str) -> Any:
    """`hook(*args)` as plain JSON data; `withheld` when it raises or answers no JSON."""
    try:
        shown = hook(*args)
        if isinstance(shown, BaseModel):
            return shown.model_dump(mode="json")
        return json.loads(json.dumps(shown))
    except Exception:
        return withheld


def _shown_record(record: JobRecord, key: str, shown_input: Any) -> JobRecord:
    return replace(record, idempotency_key=key, payload=json.dumps(shown_input))


def _shown_step(step: StepRecord, shown: Any) -> StepRecord:
    return step if step.result is None else replace(step, result=json.dumps(shown))
