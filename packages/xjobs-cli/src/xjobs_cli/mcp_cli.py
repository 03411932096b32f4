"""`xjobs mcp (MODULE:APP | --url URL) [--tenant TENANT] [--allow-actions]`: the MCP server over
stdio (needs xjobs-web)."""

from __future__ import annotations

import argparse
import asyncio

from xjobs_cli.output import EXIT_OK
from xjobs_cli.target import Subparsers, resolve
from xjobs_cli.web_cli import add_target, app_of, missing


def _run(args: argparse.Namespace) -> int:
    target = resolve(args)
    target.none()
    try:
        from xjobs_web.mcp_server import serve_stdio
    except ImportError as exc:
        raise missing("the MCP server") from exc
    app = app_of(target)
    serving = serve_stdio(
        app, allow_actions=args.allow_actions, declared=target.declared, tenant=args.tenant
    )
    asyncio.run(serving)
    return EXIT_OK


def add_parser(commands: Subparsers) -> argparse.ArgumentParser:
    """The `xjobs mcp` subparser."""
    parser = commands.add_parser(
        "mcp",
        help="an MCP server over stdio for assistants (needs xjobs-web)",
        description="Answer the Model Context Protocol on stdin/stdout: tools to list and show "
        "jobs, list queues, workers, tasks and failures, read the counters; read-only unless "
        "--allow-actions, and then each move or pause is previewed and confirmed by a second "
        "call. Needs the xjobs-web distribution.",
        usage="%(prog)s (MODULE:APP | --url URL) [--tenant TENANT] [--allow-actions]",
    )
    add_target(parser)
    parser.add_argument(
        "--tenant",
        metavar="TENANT",
        help="answer for one tenant only: every tool lists, counts, shows and moves that tenant's "
        "jobs alone (app.operator.for_tenant); another tenant's job is not found, pauses and "
        "the counters are refused",
    )
    parser.add_argument(
        "--allow-actions",
        action="store_true",
        help="also offer the tools that move jobs (cancel, retry, promote, remove) and pause or "
        "resume a queue or a job name",
    )
    parser.set_defaults(run=_run)
    return parser
