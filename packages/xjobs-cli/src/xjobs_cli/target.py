"""Which app an operator command opens: `MODULE:APP` (with its declarations) or `--url URL` (the backend alone).

Every operator verb takes its operands after the target: `xjobs jobs show myapp.main:app ID` or
`xjobs jobs show --url postgresql://… ID`. A `MODULE:APP` always holds a `:`, and no job id, queue
or task name can, so the first operand tells the two apart. With neither, the URL in `$XJOBS_URL`
is opened (so a password need not be on the command line, where `ps` shows it).
"""

from __future__ import annotations

import argparse
import os
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TypeAlias

from xjobs import App
from xjobs_cli.errors import TargetInvalidError, UsageError
from xjobs_cli.load import EXAMPLE, load_app

Subparsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"
# The backend URL a command opens when it names neither MODULE:APP nor --url.
URL_ENV = "XJOBS_URL"


def url_from_env() -> str | None:
    """`$XJOBS_URL`, or `None` when it is unset or blank."""
    url = os.environ.get(URL_ENV, "").strip()
    return url or None


@dataclass(frozen=True, slots=True)
class Target:
    """The app to open (`spec`) or the bare backend URL (`url`), and the command's operands."""

    spec: str | None
    url: str | None
    operands: tuple[str, ...]

    @property
    def declared(self) -> bool:
        """Whether the app's job and task declarations are at hand (`MODULE:APP`, not `--url`)."""
        return self.spec is not None

    def require_app(self, why: str) -> None:
        """Refuse a verb that needs the app's declarations when only a URL was given (`why` says so)."""
        if not self.declared:
            raise TargetInvalidError(
                f"{why}: name the app as MODULE:APP (e.g. {EXAMPLE}) instead of --url"
            )

    def one(self, label: str) -> str:
        """The single operand a verb takes (an ID, a queue, a name)."""
        if len(self.operands) != 1:
            raise UsageError(f"give exactly one {label} (got {len(self.operands)})")
        return self.operands[0]

    def none(self) -> None:
        """Refuse operands a verb does not take."""
        if self.operands:
            raise UsageError(f"unexpected operand {self.operands[0]!r}")


def add_operator_parser(
    commands: Subparsers,
    name: str,
    *,
    help: str,
    description: str,
    operands: str = "",
    run: Callable[[argparse.Namespace], int],
) -> argparse.ArgumentParser:
    """A verb's subparser with the target, `--url` and `--json`; `operands` names what follows it."""
    usage = f"%(prog)s (MODULE:APP | --url URL){' ' + operands if operands else ''} [options]"
    parser = commands.add_parser(name, help=help, description=description, usage=usage)
    parser.add_argument(
        "operands",
        nargs="*",
        metavar="MODULE:APP" + (f" {operands}" if operands else ""),
        help=f"the xjobs.App to open (e.g. {EXAMPLE}), unless --url is given"
        + (f"; then {operands}" if operands else ""),
    )
    parser.add_argument(
        "--url",
        default=None,
        metavar="URL",
        help=f"open the backend at URL with no job declarations (inputs, keys and step results "
        f"withheld; no tasks); default ${URL_ENV} when no MODULE:APP is named",
    )
    parser.add_argument(
        "--json",
        action="store_true",
        help="print one JSON document (version 1) instead of tables",
    )
    parser.set_defaults(run=run)
    return parser


def resolve(args: argparse.Namespace) -> Target:
    """The target and operands of a parsed command line."""
    operands: list[str] = list(args.operands)
    named_app = bool(operands) and ":" in operands[0]
    url: str | None = args.url
    if url is None and not named_app:
        url = url_from_env()
    if url is not None:
        if named_app:
            raise TargetInvalidError(
                f"give MODULE:APP or --url, not both (got {operands[0]!r} and --url)"
            )
        if not url.strip():
            raise TargetInvalidError(
                "--url is empty; pass a backend URL, e.g. postgresql://host/db"
            )
        return Target(None, url, tuple(operands))
    if not named_app:
        raise TargetInvalidError(
            f"name the app as MODULE:APP (e.g. {EXAMPLE}) before the operands, or pass --url URL "
            f"(or set ${URL_ENV})"
        )
    return Target(operands[0], None, tuple(operands[1:]))


@asynccontextmanager
async def opened(target: Target) -> AsyncIterator[App]:
    """The target's App, open for the duration (a `--url` App declares no job and no task)."""
    # retention=None: a --url App registers nothing, not even the default purge task.
    app = (
        load_app(target.spec) if target.spec is not None else App(target.url or "", retention=None)
    )
    async with app:
        yield app
