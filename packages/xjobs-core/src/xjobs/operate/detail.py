"""One job as an operator reads it: the record, the input through its `redact_input`, steps, errors."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from xjobs.contract.driver import JobRecord
from xjobs.contract.introspection import AttemptError
from xjobs.contract.stores import StepRecord
from xjobs.declare.job import JobHandle

REDACTION_FAILED = "<redact_input raised; input withheld>"


@dataclass(frozen=True, slots=True)
class JobDetail:
    """`get_job`'s answer. `input` is the JSON value an operator may see (redacted when declared)."""

    record: JobRecord
    input: Any
    steps: tuple[StepRecord, ...]
    errors: tuple[AttemptError, ...]


def redacted_input(handle: JobHandle[Any] | None, payload: str) -> Any:
    """The stored input through the job's `redact_input`; a job this process does not declare
    (an operator with only `--url`) shows the stored JSON as it is.

    A redactor that raises withholds the input rather than leak it.
    """
    if handle is None or handle.redact_input is None:
        return json.loads(payload)
    try:
        value = handle.input_model.model_validate_json(payload)
        shown = handle.redact_input(value)
    except Exception:
        return REDACTION_FAILED
    if isinstance(shown, BaseModel):
        return shown.model_dump(mode="json")
    try:
        return json.loads(json.dumps(shown))
    except (TypeError, ValueError):
        return REDACTION_FAILED
