"""Logging for a command: one stderr handler on the root logger, showing each record's extras."""

from __future__ import annotations

import logging
import sys
from typing import TextIO

LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

# The attributes every LogRecord has; anything else on a record came from `extra=`.
_STANDARD = frozenset(vars(logging.makeLogRecord({}))) | {"message", "asctime", "taskName"}


class ExtraFieldsFormatter(logging.Formatter):
    """The usual line, then ` key=value` for each field the call passed in `extra=`."""

    def formatMessage(self, record: logging.LogRecord) -> str:  # noqa: N802 - logging's name
        """The record's usual line with its extra fields appended."""
        line = super().formatMessage(record)
        extras = [f"{key}={value}" for key, value in vars(record).items() if key not in _STANDARD]
        return f"{line} {' '.join(extras)}" if extras else line


class _CliHandler(logging.StreamHandler[TextIO]):
    """Writes to whatever `sys.stderr` is when a record arrives (a test may have swapped it)."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    def emit(self, record: logging.LogRecord) -> None:
        self.stream = sys.stderr
        super().emit(record)


def configure_logging(level: str) -> None:
    """Send records at `level` and above to stderr (replacing the handler of an earlier call)."""
    root = logging.getLogger()
    for handler in [h for h in root.handlers if isinstance(h, _CliHandler)]:
        root.removeHandler(handler)
    handler = _CliHandler()
    handler.setFormatter(ExtraFieldsFormatter(FORMAT))
    root.addHandler(handler)
    root.setLevel(level)
