"""`xjobs purge [--dry-run]`: one retention pass by hand, here and now, and what it removed (or would) per store."""

from __future__ import annotations

import argparse
import asyncio

from xjobs.contract.retention import DEFAULT_RETENTION
from xjobs_cli.output import EXIT_OK, Body, emit
from xjobs_cli.table import render
from xjobs_cli.target import Subparsers, Target, add_operator_parser, opened, resolve


async def _purge(target: Target, dry_run: bool) -> Body:
    async with opened(target) as app:
        # The app's policy (the defaults unless it set its own), the defaults for a bare --url, or
        # for an app that turned retention off: a pass by hand is asked for explicitly.
        policy = app.retention or DEFAULT_RETENTION
        report = await app.purge(policy, dry_run=dry_run)
        return {
            "dry_run": dry_run,
            "policy": "default" if policy == DEFAULT_RETENTION else "app",
            "stores": [{"store": store, "rows": n} for store, n in report.items()],
            "total": sum(report.values()),
        }


def _purge_text(body: Body) -> str:
    verb = "would remove" if body["dry_run"] else "removed"
    rows = [[s["store"], s["rows"]] for s in body["stores"]]
    table = render(["store", verb], rows, right=(1,))
    return f"{table}\n{body['total']} rows {verb} ({body['policy']} retention policy)"


def _run(args: argparse.Namespace) -> int:
    target = resolve(args)
    target.none()
    emit(args.json, "purge", asyncio.run(_purge(target, args.dry_run)), _purge_text)
    return EXIT_OK


def add_parser(commands: Subparsers) -> argparse.ArgumentParser:
    """The `xjobs purge` subparser."""
    parser = add_operator_parser(
        commands,
        "purge",
        help="delete finished work past its retention, now (or count it: --dry-run)",
        description="One retention pass here and now, at one clock reading: finished jobs (with "
        "their steps and attempt errors), events, published outbox rows, expired worker rows and "
        "counter buckets past the app's Retention policy (the defaults with --url), in bounded "
        "batches; prints what went per store. The scheduler's leader runs the same pass on its "
        "cron unless the app turned retention off (App(retention=None)).",
        run=_run,
    )
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="count what a pass would remove, and remove nothing",
    )
    return parser
