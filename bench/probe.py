"""What every benchmarked job body calls: counts runs and records when each started."""

from __future__ import annotations

import asyncio
import time


class Probe:
    """The runs seen in this process: a count, start latencies, and an event when `expected` have run."""

    def __init__(self) -> None:
        self.reset(0)

    def reset(self, expected: int) -> None:
        self.expected = expected
        self.count = 0
        self.latencies_ms: list[float] = []
        self.done = asyncio.Event()

    def ran(self, i: int, sent_at: float, started_at: float | None = None) -> None:
        """The job numbered `i`, enqueued at wall time `sent_at`, has started (now, or at wall time
        `started_at` where another process saw it start)."""
        started = time.time() if started_at is None else started_at
        self.latencies_ms.append((started - sent_at) * 1000.0)
        self.count += 1
        if self.count >= self.expected:
            self.done.set()


probe = Probe()
