"""`xjobs backfills [--pending] [--environment ENV]`: the sweeps declared, the runs the ledger holds, and what is still pending (a deploy gate)."""

from __future__ import annotations

import argparse
import asyncio
from typing import Final

from xjobs.contract.backfills import BackfillLedger
from xjobs.factories.backfill_gate import current_environment
from xjobs.factories.backfill_inspect import inspect_backfills
from xjobs.factories.backfill_pending import pending_backfills
from xjobs.factories.backfill_registry import registered_backfills
from xjobs.factories.backfill_spec import validate_environment
from xjobs.operate.timefmt import iso
from xjobs_cli.output import EXIT_OK, Body, emit
from xjobs_cli.table import render
from xjobs_cli.target import Subparsers, Target, add_operator_parser, opened, resolve

# `--pending` found a sweep still to run here: the deploy stops (distinct from 1 and 2).
EXIT_PENDING: Final = 3


async def _view(target: Target, environments: list[str]) -> Body:
    async with opened(target) as app:
        app.backend.require("backfills")
        ledger: BackfillLedger | None = app.backend.backfills
        assert ledger is not None
        specs = registered_backfills(app.jobs.values())
        pending = await pending_backfills(specs, ledger, environments)
        view = await inspect_backfills(specs, ledger, pending)
        return {"environments": environments, **view}


def _text(body: Body) -> str:
    declared = render(
        ["backfill", "version", "tenant", "environments", "requires"],
        [
            [
                d["name"],
                d["version"],
                d["tenant"],
                ",".join(d["environments"] or ["*"]),
                ",".join(d["requires"]) or "-",
            ]
            for d in body["declared"]
        ],
    )
    runs = render(
        ["run", "backfill", "environment", "status", "rows", "batches", "started", "job"],
        [
            [
                r["run_id"],
                r["name"],
                r["environment"],
                r["status"],
                r["count"],
                r["batches"],
                iso(r["started_at_ms"]),
                r["job_id"],
            ]
            for r in body["runs"]
        ],
        right=(4, 5),
    )
    jobs = "each run is a job: xjobs jobs show JOB, xjobs jobs list --backfill NAME"
    return f"{declared}\n\n{runs}\n{jobs}\n\n{_pending_text(body)}"


def _pending_text(body: Body) -> str:
    pending = body["pending"]
    where = ", ".join(body["environments"])
    if not pending:
        return f"nothing pending in {where}"
    rows = [[p["name"], p["environment"], p["checksum"]] for p in pending]
    return (
        f"{render(['pending backfill', 'environment', 'checksum'], rows)}\n{len(pending)} pending"
    )


def _run(args: argparse.Namespace) -> int:
    target = resolve(args)
    target.none()
    if args.pending:
        target.require_app("--pending compares the declared backfills with the ledger")
    environments = sorted({validate_environment(e) for e in args.environment or []}) or [
        current_environment()
    ]
    body = asyncio.run(_view(target, environments))
    if args.pending:
        emit(
            args.json,
            "backfills.pending",
            {"environments": environments, "pending": body["pending"]},
            _pending_text,
        )
        return EXIT_PENDING if body["pending"] else EXIT_OK
    emit(args.json, "backfills", body, _text)
    return EXIT_OK


def add_parser(commands: Subparsers) -> argparse.ArgumentParser:
    """The `xjobs backfills` subparser."""
    parser = add_operator_parser(
        commands,
        "backfills",
        help="the declared backfills, their runs, and what is pending (--pending gates a deploy)",
        description="The sweeps the app declares (backfill()), every run the backfill ledger "
        "holds (newest first: status, rows swept, batches, the job that runs it) and the pending ones: declared for an "
        "environment with no completed run there. With --pending only that list is printed and "
        f"the exit is {EXIT_PENDING} when anything is pending, so a deploy script can stop on it. "
        "The environment is XJOBS_ENVIRONMENT (default development) unless --environment is given.",
        run=_run,
    )
    parser.add_argument(
        "--pending",
        action="store_true",
        help=f"print only the pending backfills; exit {EXIT_PENDING} when there is any",
    )
    parser.add_argument(
        "--environment",
        action="append",
        metavar="ENV",
        help="the environment to compare (repeatable; default XJOBS_ENVIRONMENT or development)",
    )
    return parser
