"""The demo's live status: one line redrawn with `\\r` on a terminal, else a line per interval."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TextIO

BAR_WIDTH = 20
STATES = ("ready", "running", "waiting", "completed", "dead", "failed", "cancelled")
ALWAYS_SHOWN = frozenset({"ready", "running", "completed", "dead", "failed"})


def status_text(
    elapsed_s: float, counts: Mapping[str, int], label: str, progress: float | None
) -> str:
    """`  1.4s  ready 12, running 8, completed 17, dead 1, failed 0   import_catalog [##  ] 60%`."""
    shown = ", ".join(
        f"{state} {counts.get(state, 0)}"
        for state in STATES
        if state in ALWAYS_SHOWN or counts.get(state)
    )
    fraction = progress or 0.0
    filled = round(fraction * BAR_WIDTH)
    bar = "#" * filled + "." * (BAR_WIDTH - filled)
    percent = "--" if progress is None else f"{fraction:.0%}"
    return f"{elapsed_s:5.1f}s  {shown}   {label} [{bar}] {percent}"


class LiveStatus:
    """The latest status: redrawn in place on a TTY, else printed at most once per `every_s`."""

    def __init__(self, out: TextIO, *, tty: bool, every_s: float = 0.5) -> None:
        self._out = out
        self._tty = tty
        self._every_s = every_s
        self._last_printed_s: float | None = None
        self._width = 0
        self._printed = ""

    def show(self, text: str, elapsed_s: float) -> None:
        """Show the status `text`: redrawn in place on a TTY, a periodic line otherwise."""
        if self._tty:
            self._out.write("\r" + text.ljust(self._width))
            self._width = max(self._width, len(text))
            self._out.flush()
        elif self._last_printed_s is None or elapsed_s - self._last_printed_s >= self._every_s:
            self._last_printed_s = elapsed_s
            self._printed = text
            self._out.write(text + "\n")
            self._out.flush()

    def finish(self, text: str) -> None:
        """The final status, always shown, ending the redrawn line."""
        if self._tty:
            self._out.write("\r" + text.ljust(self._width) + "\n")
        elif text != self._printed:
            self._out.write(text + "\n")
        self._out.flush()
