"""The event loop of a role process: like `asyncio.run`, except that what outlives the role is abandoned.

`asyncio.run` cancels every task left when its coroutine returns and then waits for each to end;
a job body that swallows its cancellation would keep a drained worker process alive for ever.
Here the leftovers get one cancellation and a short grace, and are then abandoned with the loop,
so SIGTERM always ends the process (the abandoned job's lease lapses and it is claimed again).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

log = logging.getLogger("xjobs.cli.role")

# How long a task still running after the role closed may take to honour its cancellation.
ABANDON_GRACE_S = 1.0


def run_role(main: Coroutine[Any, Any, T]) -> T:
    """Run `main` to its end on a new loop; cancel what is left once, then abandon it."""
    loop = asyncio.new_event_loop()
    try:
        result = loop.run_until_complete(main)
        leftover = [task for task in asyncio.all_tasks(loop) if not task.done()]
        for task in leftover:
            task.cancel()
        if leftover:
            loop.run_until_complete(asyncio.wait(leftover, timeout=ABANDON_GRACE_S))
        abandoned = [task for task in leftover if not task.done()]
        if abandoned:
            log.warning("jobs.role.tasks-abandoned", extra={"tasks": len(abandoned)})
        else:
            loop.run_until_complete(loop.shutdown_asyncgens())
        return result
    finally:
        loop.close()
