"""One worker process of the bench's xjobs app (W3p2, W3p4: several worker processes, one backend).

`python -m bench.fleet_worker URL CONCURRENCY`: prints `ready` once its worker runs, then works
the bench queue until SIGTERM, which drains it.
"""

from __future__ import annotations

import asyncio
import signal
import sys

import xjobs
from bench.adapters.xjobs_adapter import QUEUE, bench_job


async def serve(url: str, concurrency: int) -> None:
    """Run one worker on `url` until SIGTERM."""
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    async with xjobs.App(backend=url, jobs=[bench_job]) as app:
        worker = app.worker(queues=[QUEUE], concurrency=concurrency)
        await worker.start()
        print("ready", flush=True)
        await stop.wait()
        await worker.stop()


if __name__ == "__main__":
    asyncio.run(serve(sys.argv[1], int(sys.argv[2])))
