"""Measure the dashboard's server time over a 100,000-job table, on Postgres and Redis.

Usage: `uv run python packages/xjobs-web/scripts/first_page.py [--jobs 100000] [--runs 30]`.

Each backend gets a throwaway test server (`xjobs_pg.servers`, `xjobs_redis.servers`) and a fresh
schema or key prefix. The table is filled with real jobs (enqueue_many, 1,000 a call) over four
queues; a worker then runs one queue's jobs to completion and 1,000 jobs that end dead, so the
table holds ready, completed and dead rows. Each page is then requested through the ASGI app in
process (no socket: the time is the server's, from the request to the last body byte), and the
median and 95th percentile are printed in milliseconds. This is a figure, not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import secrets
import statistics
import sys
import time
from typing import Any

from pydantic import BaseModel

import xjobs
from xjobs_web import dashboard

PAGES = ("/jobs", "/jobs?state=dead", "/jobs?queue=q1&state=ready", "/", "/failures")


class Item(BaseModel):
    """One job's input."""

    n: int


def _declare(queue: str) -> Any:
    @xjobs.job(tenant="none", idempotency_key=lambda i: str(i.n), queue=queue, name=f"work_{queue}")
    async def work(ctx: xjobs.JobContext, input: Item) -> None:
        """Completes."""

    return work


WORKS = [_declare(f"q{i}") for i in range(4)]


@xjobs.job(
    tenant="none", idempotency_key=lambda i: str(i.n), queue="q0", retry=xjobs.Retry(attempts=1)
)
async def doomed(ctx: xjobs.JobContext, input: Item) -> None:
    """Always fails, and ends dead."""
    raise ValueError("the partner refused the file")


async def asgi_get(app: Any, path: str) -> tuple[int, float]:
    """GET `path` through the ASGI app; its status and the seconds to the last body byte."""
    route, _, query = path.partition("?")
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": route,
        "raw_path": route.encode(),
        "query_string": query.encode(),
        "root_path": "",
        "headers": [(b"host", b"localhost")],
        "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 80),
    }
    status = 0
    done = asyncio.Event()

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]
        elif message["type"] == "http.response.body" and not message.get("more_body"):
            done.set()

    started = time.perf_counter()
    await app(scope, receive, send)
    await done.wait()
    return status, time.perf_counter() - started


async def fill(app: xjobs.App, jobs: int) -> None:
    """Enqueue `jobs` over four queues and 1,000 doomed ones; run queue q0 to the end."""
    per_queue = jobs // len(WORKS)
    for work in WORKS:
        for start in range(0, per_queue, 1000):
            await work.enqueue_many([Item(n=n) for n in range(start, min(start + 1000, per_queue))])
    await doomed.enqueue_many([Item(n=n) for n in range(1000)])
    await app.run_worker(queues=["q0"], until_idle=True, handle_signals=False, concurrency=50)


async def measure(url: str, jobs: int, runs: int) -> dict[str, tuple[float, float]]:
    """Fill a store at `url`, then time each page `runs` times: its p50 and p95 in ms."""
    app = xjobs.App(url, jobs=[*WORKS, doomed])
    async with app:
        started = time.perf_counter()
        await fill(app, jobs)
        print(
            f"  filled {jobs + 1000} jobs in {time.perf_counter() - started:.0f}s", file=sys.stderr
        )
        # in process, no socket: nobody but this script reaches it
        web = dashboard(app, read_only=True, unsafe_no_auth=True)
        out: dict[str, tuple[float, float]] = {}
        for path in PAGES:
            await asgi_get(web, path)  # warm: a first plan, a first template render
            times = []
            for _ in range(runs):
                status, seconds = await asgi_get(web, path)
                assert status == 200, (path, status)
                times.append(seconds * 1000)
            times.sort()
            out[path] = (statistics.median(times), times[int(len(times) * 0.95) - 1])
        return out


def main() -> None:
    """Measure each backend named and print one line a page."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--backends", default="postgres,redis")
    args = parser.parse_args()
    for kind in args.backends.split(","):
        if kind == "postgres":
            from xjobs_pg.servers import postgres_url

            base = postgres_url()
            url = (
                f"{base}{'&' if '?' in base else '?'}xjobs_schema=bench_web_{secrets.token_hex(4)}"
            )
        else:
            from xjobs_redis.servers import redis_url

            base = redis_url()
            url = (
                f"{base}{'&' if '?' in base else '?'}xjobs_prefix=bench_web_{secrets.token_hex(4)}"
            )
        print(f"{kind}:", file=sys.stderr)
        figures = asyncio.run(measure(url, args.jobs, args.runs))
        for path, (p50, p95) in figures.items():
            print(f"{kind:9} {path:30} p50 {p50:7.1f} ms   p95 {p95:7.1f} ms")


if __name__ == "__main__":
    main()
