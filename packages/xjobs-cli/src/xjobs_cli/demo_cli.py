"""`xjobs demo`: the sample batch on an in-process worker, shown live, then what happened.

The batch is kept in a SQLite file (`xjobs-demo.db`) unless `--url` names another backend or
`--memory` asks for the store that forgets: a run killed half-way is resumed by the next one.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections import Counter
from dataclasses import dataclass
from datetime import timedelta
from typing import TextIO

import xjobs
from xjobs.contract.backend import redacted_url
from xjobs_cli import demo
from xjobs_cli.argtypes import seconds
from xjobs_cli.demo_batch import open_batch
from xjobs_cli.live import LiveStatus, status_text
from xjobs_cli.table import render

POLL_S = 0.1
DEFAULT_TIMEOUT_S = 30.0
DRAIN_MS = 2000
# A short lease: the jobs a killed run held are claimable again soon after the next run starts.
LEASE = timedelta(seconds=2)
MEMORY_URL = "memory://"


@dataclass(frozen=True, slots=True)
class KindOutcome:
    """How one kind's jobs ended, against what the demo expects of them."""

    kind: demo.DemoKind
    records: tuple[xjobs.JobRecord, ...]
    resumed: bool = False

    def count(self, state: str) -> int:
        """How many of this kind's jobs ended in `state`."""
        return sum(1 for r in self.records if r.state == state)

    @property
    def retries(self) -> int:
        """Attempts beyond the first, over every job of the kind."""
        return sum(max(r.attempt - 1, 0) for r in self.records)

    @property
    def as_expected(self) -> bool:
        """Whether every job of this kind ended as the kind says it must (after a resume, a run
        the kill cut short may have added an attempt: only the state is checked)."""
        return all(
            r.state == self.kind.expected_state
            and (self.resumed or r.attempt - 1 == self.kind.expected_retries)
            for r in self.records
        )


@dataclass(frozen=True, slots=True)
class DemoResult:
    """The demo's outcome: per kind, the worker's counters, how long it took, any timeout."""

    outcomes: tuple[KindOutcome, ...]
    stats: xjobs.WorkerStats
    worker_id: str
    elapsed_s: float
    timed_out: bool

    @property
    def ok(self) -> bool:
        """Whether the batch finished in time and every kind ended as expected."""
        return not self.timed_out and all(o.as_expected for o in self.outcomes)


async def _records(app: xjobs.App, ids: dict[str, list[str]]) -> dict[str, list[xjobs.JobRecord]]:
    return {
        name: [await app.get_job(job_id) for job_id in job_ids] for name, job_ids in ids.items()
    }


def where(url: str) -> str:
    """Where the batch is kept, as the demo says it: the file of a `sqlite://` URL, else the URL."""
    scheme, _, rest = url.partition(":///")
    return rest if scheme == "sqlite" and rest else redacted_url(url)


async def run_demo(
    out: TextIO,
    *,
    url: str = demo.DEMO_URL,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    tty: bool | None = None,
) -> DemoResult:
    """Resume the batch an earlier run left, or enqueue one, and run a worker until every job
    finished (or `timeout_s`), live."""
    app = demo.build_app(url)
    live = LiveStatus(out, tty=out.isatty() if tty is None else tty)
    progress_name = demo.import_catalog.name
    async with app:
        batch = await open_batch(app)
        ids = batch.ids
        if batch.resumed:
            jobs = "job" if batch.resumed == 1 else "jobs"
            print(f"resuming {batch.resumed} {jobs} left in {where(url)}", file=out)
        else:
            print(f"enqueued {batch.size} jobs of {len(ids)} kinds in {where(url)}", file=out)
        worker = app.worker(concurrency=10, lease=LEASE)
        started = time.monotonic()
        await worker.start()
        timed_out = False
        try:
            while True:
                records = await _records(app, ids)
                elapsed = time.monotonic() - started
                states: Counter[str] = Counter(r.state for rs in records.values() for r in rs)
                text = status_text(
                    elapsed, states, progress_name, records[progress_name][0].progress
                )
                if all(not r.live for rs in records.values() for r in rs):
                    break
                if elapsed >= timeout_s:
                    timed_out = True
                    break
                live.show(text, elapsed)
                await asyncio.sleep(POLL_S)
        finally:
            await worker.drain(timeout_ms=DRAIN_MS)
        live.finish(text)
        elapsed = time.monotonic() - started
        final = await _records(app, ids)
    outcomes = tuple(
        KindOutcome(kind, tuple(final[kind.name]), bool(batch.resumed)) for kind in demo.KINDS
    )
    return DemoResult(outcomes, worker.stats, worker.id, elapsed, timed_out)


HEADERS = ("job", "queue", "jobs", "completed", "retried", "dead", "failed", "expected", "check")


def _counts(o: KindOutcome) -> list[int]:
    return [len(o.records), o.count("completed"), o.retries, o.count("dead"), o.count("failed")]


def _row(o: KindOutcome) -> list[object]:
    retries = o.kind.expected_retries
    expected = o.kind.expected_state + (f" after {retries} retry" if retries else "")
    check = "ok" if o.as_expected else "UNEXPECTED"
    return [o.kind.name, o.kind.handle.queue, *_counts(o), expected, check]


def summary(result: DemoResult) -> str:
    """The outcome table per kind with a total row, the worker's counters, and the verdict."""
    rows = [_row(o) for o in result.outcomes]
    totals = [sum(column) for column in zip(*(_counts(o) for o in result.outcomes), strict=True)]
    rows.append(["total", "", *totals, "", ""])
    counters = " ".join(f"{k}={v}" for k, v in result.stats.as_dict().items())
    if result.timed_out:
        verdict = f"TIMED OUT: jobs were still live (stopped at {result.elapsed_s:.1f}s)"
    elif result.ok:
        verdict = f"all {totals[0]} jobs reached their expected state in {result.elapsed_s:.1f}s"
    else:
        verdict = "some jobs did not end as expected (see the check column)"
    stats = f"worker stats ({result.worker_id}):\n  {counters}"
    return "\n" + "\n\n".join([render(HEADERS, rows), stats, verdict])


def run(args: argparse.Namespace) -> int:
    """Run the demo and print its summary; exit 0 when every job ended as expected."""
    url = MEMORY_URL if args.memory else args.url
    result = asyncio.run(run_demo(sys.stdout, url=url, timeout_s=args.timeout))
    print(summary(result))
    return 0 if result.ok else 1


def add_parser(
    commands: argparse._SubParsersAction[argparse.ArgumentParser],
) -> argparse.ArgumentParser:
    """The `xjobs demo` subparser."""
    parser = commands.add_parser(
        "demo",
        help="run a sample batch of jobs, kept in a SQLite file: a killed run resumes",
        description=(
            "Enqueue 40 sample jobs (quick ones, one kind that fails once then succeeds, kinds "
            "that fail for good, one that reports progress), run a worker in this process until "
            "every job has finished, and print what happened. The jobs are kept in "
            f"{where(demo.DEMO_URL)} in the working directory: kill the demo and run it again, "
            "and it resumes the jobs left."
        ),
    )
    backend = parser.add_mutually_exclusive_group()
    backend.add_argument(
        "--url",
        default=demo.DEMO_URL,
        metavar="URL",
        help=f"keep the batch in this backend (default {demo.DEMO_URL})",
    )
    backend.add_argument(
        "--memory",
        action="store_true",
        help="run on the in-process memory backend: nothing is kept after the run",
    )
    parser.add_argument(
        "--timeout",
        type=seconds,
        default=DEFAULT_TIMEOUT_S,
        metavar="SECONDS",
        help=f"give up when the batch is not done after this long (default {DEFAULT_TIMEOUT_S:g})",
    )
    parser.set_defaults(run=run)
    return parser
