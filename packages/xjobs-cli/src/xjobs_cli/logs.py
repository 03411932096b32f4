"""Logging for a command: one stderr handler on the root logger, as text lines with their extras or as JSON lines."""

from __future__ import annotations

import logging
import sys
from typing import TextIO

from xjobs.observe.log_format import JsonFormatter, extra_fields

LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
LOG_FORMATS = ("text", "json")
FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class ExtraFieldsFormatter(logging.Formatter):
    """The usual line, then ` key=value` for each field the call passed in `extra=`."""

    def formatMessage(self, record: logging.LogRecord) -> str:  # noqa: N802 - logging's name
        """The record's usual line with its extra fields appended."""
        line = super().formatMessage(record)
        extras = [f"{key}={value}" for key, value in extra_fields(record).items()]
        return f"{line} {' '.join(extras)}" if extras else line


class _CliHandler(logging.StreamHandler[TextIO]):
    """Writes to whatever `sys.stderr` is when a record arrives (a test may have swapped it)."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    def emit(self, record: logging.LogRecord) -> None:
        self.stream = sys.stderr
        super().emit(record)


def configure_logging(level: str, log_format: str = "text") -> None:
    """Send records at `level` and above to stderr, as text or one JSON object a line (replacing
    the handler of an earlier call)."""
    root = logging.getLogger()
    for handler in [h for h in root.handlers if isinstance(h, _CliHandler)]:
        root.removeHandler(handler)
    handler = _CliHandler()
    handler.setFormatter(JsonFormatter() if log_format == "json" else ExtraFieldsFormatter(FORMAT))
    root.addHandler(handler)
    root.setLevel(level)
