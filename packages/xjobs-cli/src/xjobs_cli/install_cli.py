"""`xjobs install [--url URL] [--schema NAME]`: create or upgrade a backend's durable structures.

It opens the backend through the plugin that owns the URL's scheme and runs its one install point
(`Backend.install()`, idempotent: running it again changes nothing). A backend with nothing durable
(memory) has nothing to install, and says so.
"""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

import xjobs
from xjobs.contract.backend import redacted_url
from xjobs_cli.errors import TargetInvalidError
from xjobs_cli.target import URL_ENV, url_from_env


async def install(url: str, schema: str | None) -> str:
    """Install the backend at `url` (into `schema` when given); answers the line to print."""
    options: dict[str, Any] = {"schema": schema} if schema is not None else {}
    backend = await xjobs.connect(url, **options)
    try:
        await backend.install()
    finally:
        await backend.close()
    if backend.on_install is None:
        return f"{backend.name}: nothing to install ({redacted_url(url)})"
    where = f"schema {schema} at " if schema is not None else ""
    return f"{backend.name}: installed {where}{redacted_url(url)}"


def run(args: argparse.Namespace) -> int:
    """Install the backend at `--url` (or `$XJOBS_URL`) and print what was done; exit 0."""
    url = args.url if args.url is not None else url_from_env()
    if url is None or not url.strip():
        raise TargetInvalidError(f"pass the backend URL as --url URL or in ${URL_ENV}")
    print(asyncio.run(install(url, args.schema)))
    return 0


def add_parser(
    commands: argparse._SubParsersAction[argparse.ArgumentParser],
) -> argparse.ArgumentParser:
    """The `xjobs install` subparser."""
    parser = commands.add_parser(
        "install",
        help="create or upgrade a backend's tables",
        description=(
            "Create or upgrade the durable structures of the backend at URL (idempotent; safe to "
            "run again and from two processes at once). A worker or an app installs a missing "
            "schema on first open; run this to do it ahead of a deploy."
        ),
    )
    parser.add_argument(
        "--url",
        default=None,
        metavar="URL",
        help="the backend URL, e.g. postgresql://user@host/db (a Postgres URL may carry "
        f"?xjobs_schema=NAME); default ${URL_ENV}, which keeps a password off the command line "
        "(it is never printed)",
    )
    parser.add_argument(
        "--schema",
        default=None,
        metavar="NAME",
        help="the schema to install into, for backends that have one (Postgres default: xjobs)",
    )
    parser.set_defaults(run=run)
    return parser
