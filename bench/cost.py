"""What a measured window costs: the process's CPU seconds, the server's, and (with `--profile`)
where the process spent them, sampled by pyinstrument."""

from __future__ import annotations

import contextlib
import time
from collections import defaultdict
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

ServerSeconds = Callable[[], Awaitable[float]]
ProcessSeconds = Callable[[], float]
PROFILE_INTERVAL_S = 0.0005  # one sample each half millisecond of the window
TOP_FRAMES = 15


class Window:
    """One measured window: wall seconds, the process's CPU seconds (every thread, user and
    system; with the worker processes a peer started, see `Meter.workers`), and the server's
    seconds (see `Meter.server`) between its start and `stop()`."""

    def __init__(self, meter: Meter, server_at_start: float | None) -> None:
        self._meter = meter
        self._server_at_start = server_at_start
        self._profiler: Any = None
        self.seconds = self.cpu_s = 0.0
        self.server_s: float | None = None
        self._stopped = False
        if meter.profile_to is not None:
            from pyinstrument import Profiler

            self._profiler = Profiler(interval=PROFILE_INTERVAL_S, async_mode="disabled")
            self._profiler.start()
        self.workers_s: float | None = None
        self._workers_at_start: float = meter.workers() if meter.workers is not None else 0.0
        self._cpu_at_start = time.process_time()
        self._started = time.perf_counter()

    async def stop(self) -> None:
        """End the window (a second call does nothing); the server is read after the clocks."""
        if self._stopped:
            return
        self._stopped = True
        self.seconds = time.perf_counter() - self._started
        self.cpu_s = time.process_time() - self._cpu_at_start
        if self._meter.workers is not None:
            self.workers_s = self._meter.workers() - self._workers_at_start
            self.cpu_s += self.workers_s
        if self._profiler is not None:
            self._profiler.stop()
            self._meter.keep_profile(self._profiler)
        if self._meter.server is not None and self._server_at_start is not None:
            self.server_s = await self._meter.server() - self._server_at_start

    def per_1k(self, jobs: int) -> dict[str, float]:
        """The cost figures of `jobs` jobs: CPU seconds per 1,000 jobs, the process's and the
        server's (when the engine has one to read)."""
        if jobs <= 0:
            return {}
        out = {"cpu_s_per_1k": self.cpu_s * 1000.0 / jobs}
        if self.workers_s is not None:  # the share of it the worker processes spent
            out["workers_cpu_s_per_1k"] = self.workers_s * 1000.0 / jobs
        if self.server_s is not None:
            out["server_s_per_1k"] = self.server_s * 1000.0 / jobs
        return out


class Meter:
    """The windows of one child: `server` reads the server's cumulative seconds (None on the
    memory engine); `workers`, while a peer's worker processes are up, their cumulative CPU
    seconds (a window open before them counts them from their start); `profile_to`, when set, is where each window's profile is written, named by
    `label` (the contender and the workload)."""

    def __init__(self) -> None:
        self.server: ServerSeconds | None = None
        self.workers: ProcessSeconds | None = None
        self.profile_to: Path | None = None
        self.label = "window"

    @contextlib.asynccontextmanager
    async def window(self) -> AsyncIterator[Window]:
        """Measure the body (or up to the `stop()` it calls)."""
        before = await self.server() if self.server is not None else None
        window = Window(self, before)
        try:
            yield window
        finally:
            await window.stop()

    def keep_profile(self, profiler: Any) -> None:
        """Write the window's call tree and its top frames by own time under `profile_to`."""
        assert self.profile_to is not None
        self.profile_to.mkdir(parents=True, exist_ok=True)
        tree = profiler.output_text(unicode=False, color=False, show_all=False)
        (self.profile_to / f"{self.label}.tree.txt").write_text(tree)
        (self.profile_to / f"{self.label}.top.txt").write_text(
            top_frames(profiler.last_session.root_frame())
        )


def top_frames(root: Any, limit: int = TOP_FRAMES) -> str:
    """The frames that spent the most time themselves (not in what they called), summed over every
    call path: a table of share, seconds, function and place."""
    own: dict[tuple[str, str], float] = defaultdict(float)
    total = root.time if root is not None else 0.0
    stack = [root] if root is not None else []
    while stack:
        frame = stack.pop()
        stack.extend(frame.children)
        if frame.is_synthetic:  # a `[self]` time of the frame above: counted with it
            continue
        where = f"{frame.file_path_short or '?'}:{frame.line_no or 0}"
        own[(frame.function or "?", where)] += frame.total_self_time
    ranked = sorted(own.items(), key=lambda item: item[1], reverse=True)[:limit]
    lines = [f"{'share':>6} {'seconds':>8}  frame", f"{'':>6} {total:>8.3f}  (the window)"]
    for (function, where), seconds in ranked:
        share = seconds / total * 100.0 if total else 0.0
        lines.append(f"{share:>5.1f}% {seconds:>8.3f}  {function}  {where}")
    return "\n".join(lines) + "\n"


meter = Meter()
