"""Debounce and throttle for Django tasks: `OPTIONS["flow"]` read once, and the key that makes the
enqueues of one task with the same arguments one idempotency namespace."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from xjobs.declare.job import EnqueueOptions
from xjobs.errors import OptionInvalidError
from xjobs.options import duration_ms

WINDOWS = ("debounce", "throttle")


def read_flow(alias: str, raw: object) -> dict[str, EnqueueOptions]:
    """`OPTIONS["flow"]`: a task's import path to `{"debounce": seconds}` or `{"throttle":
    seconds}`; anything else is `XJOBS_OPTION_INVALID` naming the entry."""
    where = f'TASKS["{alias}"]["OPTIONS"]["flow"]'
    if not isinstance(raw, Mapping):
        raise OptionInvalidError(f"{where} must map a task's import path to its window")
    flows: dict[str, EnqueueOptions] = {}
    for path, window in raw.items():
        if not isinstance(path, str) or "." not in path:
            raise OptionInvalidError(f"{where} keys are task import paths, got {path!r}")
        if not isinstance(window, Mapping) or len(window) != 1 or next(iter(window)) not in WINDOWS:
            raise OptionInvalidError(
                f'{where}["{path}"] must be {{"debounce": seconds}} or {{"throttle": seconds}}'
            )
        ((kind, seconds),) = window.items()
        ms = duration_ms(f'{where}["{path}"]["{kind}"]', seconds)
        span = timedelta(milliseconds=ms)
        flows[path] = (
            EnqueueOptions(debounce=span) if kind == "debounce" else EnqueueOptions(throttle=span)
        )
    return flows


def flow_token(task: str, args: list[Any], kwargs: dict[str, Any]) -> str:
    """The idempotency key of a flow-controlled call: the same task with the same JSON arguments
    is the same namespace, so a debounce or a throttle window folds the calls into one job."""
    text = json.dumps([task, args, kwargs], sort_keys=True, separators=(",", ":"), default=str)
    return "flow:" + hashlib.sha256(text.encode()).hexdigest()
