"""`xjobs backends`: the installed backend drivers, as a table or as JSON."""

from __future__ import annotations

import argparse
import json
from typing import Any

import xjobs
from xjobs_cli.table import render


def backend_rows() -> list[dict[str, Any]]:
    """One JSON-ready row per installed driver, sorted by name."""
    return [
        {
            "name": found.factory.name,
            "schemes": list(found.factory.schemes),
            "distribution": found.distribution,
            "version": found.version,
            "api_version": found.factory.api_version,
            "api_compatible": found.factory.api_version == xjobs.DRIVER_API_VERSION,
            "description": found.factory.description,
        }
        for found in xjobs.installed_backends()
    ]


def run(args: argparse.Namespace) -> int:
    """Print the installed drivers as a table or JSON; exit 0."""
    rows = backend_rows()
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    if not rows:
        print(
            "no xjobs backend is installed (xjobs-core ships memory://; "
            "is XJOBS_DISABLE_PLUGINS set?)"
        )
        return 0
    table = [
        [
            row["name"],
            ", ".join(f"{s}://" for s in row["schemes"]),
            row["distribution"],
            row["version"],
            str(row["api_version"])
            + ("" if row["api_compatible"] else f" (core speaks {xjobs.DRIVER_API_VERSION})"),
        ]
        for row in rows
    ]
    print(render(["name", "schemes", "distribution", "version", "driver api"], table))
    return 0


def add_parser(
    commands: argparse._SubParsersAction[argparse.ArgumentParser],
) -> argparse.ArgumentParser:
    """The `xjobs backends` subparser."""
    parser = commands.add_parser(
        "backends",
        help="list the installed backend drivers",
        description="List the installed backend drivers: name, URL schemes, distribution, version, "
        "driver API.",
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.set_defaults(run=run)
    return parser
