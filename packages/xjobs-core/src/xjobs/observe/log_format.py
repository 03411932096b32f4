"""`JsonFormatter`: one JSON object a line — ts, level, logger, event (such as `jobs.settle.unowned`) and each extra field."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from typing import Any, Final

# The attributes every LogRecord has; anything else on a record came from `extra=`.
STANDARD_FIELDS: Final = frozenset(vars(logging.makeLogRecord({}))) | {
    "message",
    "asctime",
    "taskName",
}


def extra_fields(record: logging.LogRecord) -> dict[str, Any]:
    """The fields a logging call passed in `extra=`."""
    return {key: value for key, value in vars(record).items() if key not in STANDARD_FIELDS}


def _plain(value: Any) -> Any:
    """A value JSON can hold as it is, or its text."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return str(value)


class JsonFormatter(logging.Formatter):
    """Formats a record as one JSON line; the message is the `event` (xjobs logs its event name)."""

    def format(self, record: logging.LogRecord) -> str:
        """The record as one line of JSON."""
        document: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "event": record.getMessage(),
        }
        for key, value in extra_fields(record).items():
            document.setdefault(key, _plain(value))
        if record.exc_info:
            document["exc"] = self.formatException(record.exc_info)
        elif record.exc_text:
            document["exc"] = record.exc_text
        return json.dumps(document, ensure_ascii=False)
