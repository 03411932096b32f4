"""`xjobs jobs list|show` and the `jobs` verb's sub-verbs (moves in `moves_cli`, pauses in `pause_cli`)."""

from __future__ import annotations

import argparse
import asyncio
import json
from typing import Any

from xjobs import App
from xjobs.factories.backfill_inspect import backfill_run
from xjobs.factories.backfill_registry import registered_backfills
from xjobs.operate import shapes
from xjobs.operate.detail import JobDetail
from xjobs.operate.filters import job_filter
from xjobs.operate.timefmt import age, iso
from xjobs.operate.verbs import VERBS
from xjobs_cli import moves_cli, pause_cli
from xjobs_cli.argtypes import add_job_filters, states
from xjobs_cli.errors import UsageError
from xjobs_cli.family_view import family_lines, family_of
from xjobs_cli.output import EXIT_OK, Body, emit
from xjobs_cli.table import render
from xjobs_cli.target import Subparsers, Target, add_operator_parser, opened, resolve

ERROR_CHARS = 60

# What `redaction` in `jobs.show` says about the `input`, the key and the step results beside it.
REDACTION_NOTES = {
    "applied": "shown through the job's redact hooks",
    "none": "as stored: the job declares no redact hooks",
    "unknown-job": "withheld: the app declares no job of this name, so no redact hook can apply",
    "unavailable": "withheld: --url opens the backend without job declarations",
}


# -- list -------------------------------------------------------------------------------------------


def _listed_name(args: argparse.Namespace) -> str | None:
    """The job name a listing narrows to: `--name`, or `--backfill` (a sweep's runs are jobs of
    its name); both, naming two things, are refused."""
    if args.backfill is None:
        return str(args.name) if args.name is not None else None
    if args.name is not None and args.name != args.backfill:
        raise UsageError(f"--backfill {args.backfill} lists jobs named so; drop --name {args.name}")
    return str(args.backfill)


def _require_backfill(target: Target, app: App, name: str) -> None:
    """With the app's declarations at hand, `--backfill` names one of its sweeps."""
    if not target.declared:
        return
    declared = sorted(spec.name for spec in registered_backfills(app.jobs.values()))
    if name not in declared:
        raise UsageError(
            f"the app declares no backfill {name!r} (declared: {', '.join(declared) or 'none'}); "
            "xjobs backfills lists them"
        )


async def _list_page(target: Target, args: argparse.Namespace) -> Body:
    where = job_filter(
        states=args.state or (), queue=args.queue, name=_listed_name(args), tenant=args.tenant
    )
    async with opened(target) as app:
        if args.backfill is not None:
            _require_backfill(target, app, args.backfill)
        page = await app.operator.list_jobs(where, limit=args.limit, after=args.after)
        now = app.clock.now_ms()
    return {
        "where": shapes.where(where),
        "limit": args.limit,
        "after": args.after,
        "now_ms": now,
        "jobs": [shapes.job_summary(j) for j in page.jobs],
        "cursor": page.cursor,
    }


def _first_line(text: str | None, width: int = ERROR_CHARS) -> str:
    if not text:
        return ""
    line = text.split("\n", 1)[0]
    return line if len(line) <= width else line[: width - 1] + "…"


def _list_text(body: Body) -> str:
    now = body["now_ms"]
    jobs = body["jobs"]
    if not jobs:
        lines = ["no job matches"]
    else:
        rows = [
            [
                j["id"],
                j["name"],
                j["queue"],
                j["state"],
                f"{j['attempt']}/{j['max_attempts']}",
                age(j["created_at_ms"], now),
                age(j["run_at_ms"], now) if j["state"] == "ready" else "",
                _first_line(j["last_error"]),
            ]
            for j in jobs
        ]
        headers = ["id", "name", "queue", "state", "attempt", "created", "due", "last error"]
        lines = [render(headers, rows)]
    if body["cursor"] is not None:
        lines.append(f"next page: --after {body['cursor']}")
    return "\n".join(lines)


def _run_list(args: argparse.Namespace) -> int:
    target = resolve(args)
    target.none()
    emit(args.json, "jobs.list", asyncio.run(_list_page(target, args)), _list_text)
    return EXIT_OK


# -- show -------------------------------------------------------------------------------------------


def _redaction(target: Target, detail: JobDetail) -> str:
    return "unavailable" if not target.declared else detail.redaction


async def _show_job(target: Target, job_id: str) -> Body:
    async with opened(target) as app:
        detail = await app.operator.get_job(job_id)
        run = await backfill_run(app.backend, app.operator, detail.record)
        family = await family_of(app, job_id)
        now = app.clock.now_ms()
    return {
        "now_ms": now,
        "job": shapes.job_record(detail.record),
        "backfill": run,
        "input": detail.input,
        "redaction": _redaction(target, detail),
        "steps": [shapes.step(s) for s in detail.steps],
        "errors": [shapes.attempt_error(e) for e in detail.errors],
        "family": family,
    }


def _indented(text: str, prefix: str = "    ") -> str:
    return "\n".join(prefix + line for line in text.splitlines())


def _when(ms: int | None, now: int) -> str:
    return "-" if ms is None else f"{iso(ms)} ({age(ms, now)})"


def _show_text(body: Body) -> str:
    now = body["now_ms"]
    j: dict[str, Any] = body["job"]
    fields = [
        ("queue", j["queue"]),
        ("tenant", j["tenant"] or "-"),
        ("attempt", f"{j['attempt']} of {j['max_attempts']} (claims: {j['claims']})"),
        ("created", _when(j["created_at_ms"], now)),
        ("due", _when(j["run_at_ms"], now)),
        ("updated", _when(j["updated_at_ms"], now)),
        ("finished", _when(j["finished_at_ms"], now)),
        ("claimed by", j["claimed_by"] or "-"),
        ("lease until", _when(j["lease_until_ms"], now)),
        ("progress", "-" if j["progress"] is None else f"{j['progress']:.0%}"),
        ("priority", str(j["priority"])),
        ("idempotency", j["idempotency_key"]),
        ("run id", j["run_id"]),
        ("enqueued by", j["enqueued_by"] or "-"),
        ("traceparent", j["traceparent"] or "-"),
        ("last error", _first_line(j["last_error"], 200) or "-"),
    ]
    width = max(len(label) for label, _ in fields)
    lines = [f"job {j['id']}  {j['name']}  [{j['state']}]"]
    lines += [f"  {label.ljust(width)}  {value}" for label, value in fields]
    lines.append(f"input ({REDACTION_NOTES[body['redaction']]}):")
    lines.append(_indented(json.dumps(body["input"], indent=2)))
    steps = body["steps"]
    lines.append(f"steps ({len(steps)}):")
    if steps:
        rows = [
            [
                s["position"],
                s["name"],
                s["status"],
                age(s["created_at_ms"], now),
                _first_line(s["error"] or json.dumps(s["result"])),
            ]
            for s in steps
        ]
        lines.append(render(["#", "name", "status", "at", "result / error"], rows, indent="  "))
    lines += family_lines(body["family"])
    if body["backfill"] is not None:
        lines.append(_backfill_text(body["backfill"]))
    errors = body["errors"]
    lines.append(f"errors ({len(errors)}, oldest first):")
    for e in errors:
        head = f"{e['error_class']}: {e['message']}" if e["message"] else e["error_class"]
        worker = f" on worker {e['worker_id']}" if e["worker_id"] else ""
        lines.append(f"  attempt {e['attempt']} at {iso(e['at_ms'])}{worker}: {head}")
        if e["traceback"]:
            lines.append(_indented(e["traceback"].rstrip("\n"), "      "))
    return "\n".join(lines)


def _backfill_text(run: Body) -> str:
    return (
        f"backfill {run['name']}: run {run['run_id']} [{run['status']}] in {run['environment']}, "
        f"{run['count']} rows in {run['batches']} batches, cursor {run['cursor'] or '-'} "
        "(xjobs backfills lists every run)"
    )


def _run_show(args: argparse.Namespace) -> int:
    target = resolve(args)
    emit(args.json, "jobs.show", asyncio.run(_show_job(target, target.one("job ID"))), _show_text)
    return EXIT_OK


# -- the verb ---------------------------------------------------------------------------------------


def add_parser(commands: Subparsers) -> argparse.ArgumentParser:
    """The `xjobs jobs` subparser and its sub-verbs."""
    parser = commands.add_parser(
        "jobs",
        help="list, show and steer jobs",
        description="List and show jobs; cancel, retry, promote or remove them by id or by "
        "filter; pause and resume a job name.",
    )
    verbs = parser.add_subparsers(dest="verb", metavar="VERB", required=True)

    listing = add_operator_parser(
        verbs,
        "list",
        help="one page of jobs, newest first",
        description="One page of jobs, newest first; the page's cursor, passed as --after, "
        "gives the next.",
        run=_run_list,
    )
    listing.add_argument(
        "--state",
        type=states,
        default=None,
        metavar="S,S",
        help="only jobs in these states (ready, running, waiting, completed, failed, dead, cancelled)",
    )
    add_job_filters(listing)
    listing.add_argument(
        "--backfill",
        default=None,
        metavar="NAME",
        help="only the runs of this backfill (its jobs; xjobs backfills lists the sweeps)",
    )
    listing.add_argument(
        "--limit", type=int, default=50, metavar="N", help="jobs per page, 1 to 500 (default 50)"
    )
    listing.add_argument(
        "--after", default=None, metavar="CURSOR", help="the cursor the previous page printed"
    )

    add_operator_parser(
        verbs,
        "show",
        help="one job: record, input, steps and errors",
        description="One job: its record, its input, its steps, each attempt's error and the "
        "backfill run it is (if it runs a sweep); the input, "
        "the idempotency key and the step results through the job's redact hooks, withheld for a "
        "job the app does not declare (and always with --url).",
        operands="ID",
        run=_run_show,
    )
    for verb in VERBS:
        moves_cli.add_parser(verbs, verb)
    pause_cli.add_parsers(verbs, "job")
    return parser
