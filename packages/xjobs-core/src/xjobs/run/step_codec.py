"""How a step's error is stored and raised again; its result goes through `xjobs.codec`."""

from __future__ import annotations

import json

from xjobs.declare.retry import is_terminal_error
from xjobs.errors import StepFailedError

MAX_ERROR_MESSAGE_CHARS = 2000


def encode_error(error: BaseException) -> str:
    """The JSON text of a step's error: its type, its message (bounded) and whether it was terminal."""
    return json.dumps(
        {
            "type": type(error).__qualname__,
            "message": str(error)[:MAX_ERROR_MESSAGE_CHARS],
            "terminal": is_terminal_error(error),
        },
        ensure_ascii=False,
    )


def failed(step: str, error_text: str) -> StepFailedError:
    """The `StepFailedError` a step raises for a recorded error, live or on a replay alike."""
    record = json.loads(error_text)
    error_type, message = str(record["type"]), str(record["message"])
    return StepFailedError(
        f"step {step!r} failed: {error_type}: {message}",
        step=step,
        error_type=error_type,
        terminal=bool(record["terminal"]),
    )
