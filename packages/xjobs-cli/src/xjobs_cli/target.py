"""Which app an operator command opens: `MODULE:APP` (with its declarations) or `--url URL` (the backend alone).

Every operator verb takes its operands after the target: `xjobs jobs show myapp.main:app ID` or
`xjobs jobs show --url postgresql://… ID`. A `MODULE:APP` always holds a `:`, and no job id, queue
or task name can, so the first operand tells the two apart.
"""

from __future__ import annotations

import argparse
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TypeAlias

from xjobs import App
from xjobs_cli.errors import TargetInvalidError, UsageError
from xjobs_cli.load import EXAMPLE, load_app

Subparsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


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
        help="open the backend at URL with no job declarations (no redaction, no tasks)",
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
    if args.url is not None:
        if operands and ":" in operands[0]:
            raise TargetInvalidError(
                f"give MODULE:APP or --url, not both (got {operands[0]!r} and --url)"
            )
        if not args.url.strip():
            raise TargetInvalidError(
                "--url is empty; pass a backend URL, e.g. postgresql://host/db"
            )
        return Target(None, args.url, tuple(operands))
    if not operands or ":" not in operands[0]:
        raise TargetInvalidError(
            f"name the app as MODULE:APP (e.g. {EXAMPLE}) before the operands, or pass --url URL"
        )
    return Target(operands[0], None, tuple(operands[1:]))


@asynccontextmanager
async def opened(target: Target) -> AsyncIterator[App]:
    """The target's App, open for the duration (a `--url` App declares no job and no task)."""
    app = load_app(target.spec) if target.spec is not None else App(target.url or "")
    async with app:
        yield app
