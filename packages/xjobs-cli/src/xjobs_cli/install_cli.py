"""`xjobs install --url URL [--schema NAME]`: create or upgrade a backend's durable structures.

It opens the backend through the plugin that owns the URL's scheme and runs its one install point
(`Backend.install()`, idempotent: running it again changes nothing). A backend with nothing durable
(memory) has nothing to install, and says so.
"""

from __future__ import annotations

import argparse
import asyncio
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import xjobs


def redacted(url: str) -> str:
    """`url` with any password replaced by `***`, fit to print."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.netloc.rpartition("@")[2]
    user = parts.username or ""
    return urlunsplit(parts._replace(netloc=f"{user}:***@{host}"))


async def install(url: str, schema: str | None) -> str:
    """Install the backend at `url` (into `schema` when given); answers the line to print."""
    options: dict[str, Any] = {"schema": schema} if schema is not None else {}
    backend = await xjobs.connect(url, **options)
    try:
        await backend.install()
    finally:
        await backend.close()
    if backend.on_install is None:
        return f"{backend.name}: nothing to install ({redacted(url)})"
    where = f"schema {schema} at " if schema is not None else ""
    return f"{backend.name}: installed {where}{redacted(url)}"


def run(args: argparse.Namespace) -> int:
    """Install the backend at `--url` and print what was done; exit 0."""
    print(asyncio.run(install(args.url, args.schema)))
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
        required=True,
        metavar="URL",
        help="the backend URL, e.g. postgresql://user@host/db (a Postgres URL may carry "
        "?xjobs_schema=NAME)",
    )
    parser.add_argument(
        "--schema",
        default=None,
        metavar="NAME",
        help="the schema to install into, for backends that have one (Postgres default: xjobs)",
    )
    parser.set_defaults(run=run)
    return parser
