"""`xjobs migrate --from URL --to URL`: move a project's jobs, steps, results and schedules to another backend.

The step up from the embedded default: `--from` is `sqlite:///xjobs.db` unless named, `--to` is
`$XJOBS_URL` unless named. Everything is checked before anything is written: both URLs, the
source file, an empty target (unless `--merge`), no live worker on either side.
"""

from __future__ import annotations

import argparse
import asyncio
import os
from typing import Any
from urllib.parse import unquote, urlsplit

import xjobs
from xjobs.contract.backend import Backend, redacted_url
from xjobs.contract.introspection import JobFilter
from xjobs.contract.plugins import DEFAULT_URL
from xjobs_cli.errors import TargetInvalidError
from xjobs_cli.migrate_copy import CopyCounts, JobCopy
from xjobs_cli.migrate_state import StateCounts, copy_pauses, copy_schedules
from xjobs_cli.output import emit, progress
from xjobs_cli.target import URL_ENV, url_from_env

# What the contract gives no read or write for, said in every summary.
NOT_COPIED = (
    "sent events",
    "outbox rows not yet relayed",
    "worker rows",
    "counters",
    "webhook and backfill ledgers",
    "each job's attempt count, timestamps and error history before its last error",
)


def _source_file(url: str) -> str | None:
    """The file of a `sqlite://` URL (relative to the working directory), else `None`."""
    parts = urlsplit(url)
    if parts.scheme.lower() != "sqlite":
        return None
    return os.path.abspath(unquote(parts.path[1:] if parts.path.startswith("/") else parts.path))


def check_urls(source: str, target: str | None) -> str:
    """Refuse what can be refused before opening anything; answers the target URL."""
    if target is None or not target.strip():
        raise TargetInvalidError(f"name the backend to copy into: --to URL (or set ${URL_ENV})")
    if source.strip() == target.strip():
        raise TargetInvalidError(f"--from and --to are the same backend ({redacted_url(source)})")
    if urlsplit(source).scheme.lower() == "memory":
        raise TargetInvalidError(
            "--from memory:// is a store of one process that forgets at exit: nothing to copy"
        )
    path = _source_file(source)
    if path is not None and not os.path.isfile(path):
        raise TargetInvalidError(
            f"--from {redacted_url(source)}: there is no file {path} (run from the directory "
            "that holds it, or write its path: sqlite:////absolute/path.db)"
        )
    return target


async def _check_sides(source: Backend, target: Backend, *, merge: bool) -> None:
    source.require("introspection")
    for side, backend in (("--from", source), ("--to", target)):
        if backend.workers is not None and await backend.workers.list():
            raise TargetInvalidError(
                f"{side} {redacted_url(backend.url)} has live workers (xjobs workers list): stop "
                "them for the copy, so no job moves while it is copied, then start the workers "
                "on the new backend"
            )
    if merge or target.introspection is None:
        return
    if await target.introspection.list_jobs(JobFilter(), limit=1, after=None):
        raise TargetInvalidError(
            f"--to {redacted_url(target.url)} already holds jobs: pass --merge to copy beside "
            "them (ids it already holds are skipped, so this also finishes a copy cut short)"
        )


def summary(source: str, target: str, jobs: CopyCounts, state: StateCounts) -> dict[str, Any]:
    """The copy as the `jobs.migrate` document's body."""
    return {
        "from": redacted_url(source),
        "to": redacted_url(target),
        "jobs": {"copied": dict(sorted(jobs.jobs.items())), "already_there": jobs.present},
        "steps": jobs.steps,
        "results": jobs.results,
        "tasks": state.tasks,
        "task_pauses": state.task_pauses,
        "pauses": state.pauses,
        "not_copied": [{"id": i, "reason": why} for i, why in sorted(jobs.not_copied.items())],
        "never_copied": list(NOT_COPIED),
    }


def text(body: Any) -> str:
    """The summary as lines for a reader."""
    copied = body["jobs"]["copied"]
    states = ", ".join(f"{state} {n}" for state, n in copied.items()) or "none"
    lines = [
        f"copied {sum(copied.values())} jobs from {body['from']} to {body['to']} ({states}); "
        f"{body['jobs']['already_there']} were already there",
        f"steps {body['steps']}, results {body['results']}, task watermarks {body['tasks']}, "
        f"task pauses {body['task_pauses']}, queue and job pauses {body['pauses']}",
        f"not copied (no contract read or write for them): {', '.join(body['never_copied'])}",
    ]
    lines += [f"NOT COPIED {row['id']}: {row['reason']}" for row in body["not_copied"]]
    return "\n".join(lines)


async def migrate(
    source_url: str, target_url: str, *, live_only: bool, merge: bool, as_json: bool
) -> dict[str, Any]:
    """Copy everything the contract lets through; answers the summary's body."""
    source = await xjobs.connect(source_url)
    try:
        target = await xjobs.connect(target_url)
        try:
            await _check_sides(source, target, merge=merge)
            state = StateCounts()
            await copy_schedules(source, target, state)

            def told(counts: CopyCounts) -> None:
                progress(as_json, f"copied {counts.copied} jobs, {counts.present} already there")

            jobs = await JobCopy(source, target, on_page=told).run(live_only=live_only)
            await copy_pauses(source, target, state)
        finally:
            await target.close()
    finally:
        await source.close()
    return summary(source_url, target_url, jobs, state)


def run(args: argparse.Namespace) -> int:
    """Copy, print the summary; exit 0, or 2 when a job could not be copied."""
    target = check_urls(args.source, args.target if args.target is not None else url_from_env())
    body = asyncio.run(
        migrate(args.source, target, live_only=args.live_only, merge=args.merge, as_json=args.json)
    )
    emit(args.json, "jobs.migrate", body, text)
    if body["not_copied"]:
        raise TargetInvalidError(
            f"{len(body['not_copied'])} jobs were not copied: a live job on the target holds "
            "their idempotency namespace (see not_copied)"
        )
    return 0


def add_parser(
    commands: argparse._SubParsersAction[argparse.ArgumentParser],
) -> argparse.ArgumentParser:
    """The `xjobs migrate` subparser."""
    parser = commands.add_parser(
        "migrate",
        help="copy jobs, steps, results and schedules to another backend (SQLite to Postgres)",
        description=(
            "Copy every job of the --from backend into the --to backend with its id, run id, "
            "input, step records and result: live jobs (ready, delayed, waiting; running ones "
            "as ready, uncounted), finished jobs' history, each cron task's watermark and pause, "
            "queue and job pauses. Stop the workers first; start them on the new backend after. "
            "A copy cut short is finished by running it again with --merge."
        ),
    )
    parser.add_argument(
        "--from",
        dest="source",
        default=DEFAULT_URL,
        metavar="URL",
        help=f"the backend to copy from (default {DEFAULT_URL}, the embedded default)",
    )
    parser.add_argument(
        "--to",
        dest="target",
        default=None,
        metavar="URL",
        help=f"the backend to copy into, e.g. postgresql://user@host/db (default ${URL_ENV})",
    )
    parser.add_argument(
        "--live-only",
        action="store_true",
        help="copy only the jobs not yet finished (no completed, failed, dead, cancelled ones)",
    )
    parser.add_argument(
        "--merge",
        action="store_true",
        help="copy into a backend that already holds jobs (ids it holds are skipped)",
    )
    parser.add_argument(
        "--json", action="store_true", help="print one JSON document (version 1) as the summary"
    )
    parser.set_defaults(run=run)
    return parser
