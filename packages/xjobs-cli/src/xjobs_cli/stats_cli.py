"""`xjobs stats [--since 1h] [--by name|queue]`: throughput and outcomes from the counters, and each
queue's oldest due job and dead jobs (the `queue_oldest_ready_seconds` / `queue_dead_jobs` metrics)."""

from __future__ import annotations

import argparse
import asyncio

from xjobs import App
from xjobs.operate import shapes
from xjobs.operate.counter_sums import window
from xjobs.operate.outcomes import OUTCOMES, grouped
from xjobs.operate.timefmt import iso, span
from xjobs_cli.argtypes import duration_ms
from xjobs_cli.output import EXIT_OK, Body, emit
from xjobs_cli.table import render
from xjobs_cli.target import Subparsers, Target, add_operator_parser, opened, resolve


def _queues_of(app: App) -> dict[str, str]:
    return {name: handle.queue for name, handle in app.jobs.items()}


async def _stats(target: Target, since_ms: int, by: str) -> Body:
    async with opened(target) as app:
        op = app.operator
        now = app.clock.now_ms()
        win = await window(op.counters, now, since_ms)
        queues = await op.queues()
        rows, total = grouped(win, _queues_of(app) if by == "queue" else None)
    return {
        "by": by,
        "since_ms": since_ms,
        "window": {"start_ms": win.start_ms, "until_ms": win.until_ms, "tiers": win.tiers},
        "rows": rows,
        "total": total,
        "queues": [
            {
                "queue": q.queue,
                "oldest_ready_seconds": shapes.oldest_ready_age_s(q, now) or 0.0,
                "dead_jobs": q.dead,
                "dead_jobs_at_least": shapes.capped(q.dead),
            }
            for q in queues
        ],
    }


def _rate(rate: float | None) -> str:
    return "-" if rate is None else f"{rate:.1%}"


def _stats_text(body: Body) -> str:
    win = body["window"]
    lines = [
        f"last {span(body['since_ms'])}: from {iso(win['start_ms'])} to {iso(win['until_ms'])} "
        f"({', '.join(win['tiers'])} counters)"
    ]
    if not body["rows"]:
        lines.append("no run ended in this window")
    else:
        headers = [body["by"], *OUTCOMES, "failure rate", "per min"]
        table = [
            [
                r["key"],
                *(r["outcomes"][o] for o in OUTCOMES),
                _rate(r["failure_rate"]),
                f"{r['completed_per_min']:g}",
            ]
            for r in [*body["rows"], {"key": "all", **body["total"]}]
        ]
        lines.append(render(headers, table, right=(len(headers) - 2, len(headers) - 1)))
    if body["queues"]:
        rows = [
            [
                q["queue"],
                span(int(q["oldest_ready_seconds"] * 1000)),
                f"{q['dead_jobs']}+" if q["dead_jobs_at_least"] else q["dead_jobs"],
            ]
            for q in body["queues"]
        ]
        lines.append(render(["queue", "oldest ready", "dead jobs"], rows, right=(1, 2)))
    return "\n".join(lines)


def _run(args: argparse.Namespace) -> int:
    target = resolve(args)
    target.none()
    if args.by == "queue":
        target.require_app("--by queue maps job names to queues through the app's declarations")
    emit(args.json, "stats", asyncio.run(_stats(target, args.since, args.by)), _stats_text)
    return EXIT_OK


def add_parser(commands: Subparsers) -> argparse.ArgumentParser:
    """The `xjobs stats` subparser."""
    parser = add_operator_parser(
        commands,
        "stats",
        help="throughput and outcomes per job name or queue",
        description="Runs that ended in the window, per job name (or queue): completed, retried, "
        "dead-lettered, dropped, refused and cancelled, the failure rate (failed attempts over "
        "attempts that ended) and completions per minute; then each queue's oldest due job and "
        "dead jobs.",
        run=_run,
    )
    parser.add_argument(
        "--since",
        type=duration_ms,
        default=duration_ms("1h"),
        metavar="DURATION",
        help="the window: 90s, 15m, 1h, 7d, 1h30m … (default 1h); minute counters up to 6h, "
        "hour counters up to 14d, day counters beyond",
    )
    parser.add_argument(
        "--by",
        choices=("name", "queue"),
        default="name",
        help="group by job name (default) or by queue (needs MODULE:APP)",
    )
    return parser
