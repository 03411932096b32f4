"""Pausing and resuming a queue (`xjobs queues pause|resume Q`) or a job name (`xjobs jobs pause|resume --name N`).

A pause is a row the claim reads: no worker claims what it names until it is resumed, whichever
worker process runs (a restarted one too). Jobs already running are not touched.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
from typing import Literal

from xjobs_cli.errors import UsageError
from xjobs_cli.output import EXIT_OK, Body, emit
from xjobs_cli.target import Subparsers, Target, add_operator_parser, opened, resolve

Kind = Literal["queue", "job"]
Action = Literal["pause", "resume"]

# The noun each kind's verbs live under: `queues pause`, `jobs pause`.
NOUNS: dict[Kind, str] = {"queue": "queues", "job": "jobs"}


async def _toggle(kind: Kind, action: Action, target: Target, name: str) -> Body:
    async with opened(target) as app:
        op = app.operator
        changed = await (op.pause(kind, name) if action == "pause" else op.resume(kind, name))
    return {"target": {"kind": kind, "name": name}, "changed": changed}


def _toggle_text(action: Action, body: Body) -> str:
    what = f"{body['target']['kind']} {body['target']['name']}"
    if action == "pause":
        return f"paused {what}" if body["changed"] else f"{what} was already paused"
    return f"resumed {what}" if body["changed"] else f"{what} was not paused"


def _name(kind: Kind, target: Target, args: argparse.Namespace) -> str:
    if kind == "queue":
        return target.one("queue")
    target.none()
    if args.name is None:
        raise UsageError("name the job to pause or resume with --name N")
    name: str = args.name
    return name


def _run(kind: Kind, action: Action, args: argparse.Namespace) -> int:
    target = resolve(args)
    body = asyncio.run(_toggle(kind, action, target, _name(kind, target, args)))
    emit(args.json, f"{NOUNS[kind]}.{action}", body, functools.partial(_toggle_text, action))
    return EXIT_OK


def add_parsers(verbs: Subparsers, kind: Kind) -> None:
    """The `pause` and `resume` sub-verbs of `kind`'s noun."""
    actions: tuple[Action, ...] = ("pause", "resume")
    for action in actions:
        does = (
            "no worker claims its jobs until it is resumed; running jobs are not touched"
            if action == "pause"
            else "workers claim its jobs again"
        )
        subject = "a queue" if kind == "queue" else "a job name, in every queue"
        parser = add_operator_parser(
            verbs,
            action,
            help=f"{action} {subject}",
            description=f"{action.capitalize()} {subject}: {does}.",
            operands="QUEUE" if kind == "queue" else "",
            run=functools.partial(_run, kind, action),
        )
        if kind == "job":
            parser.add_argument("--name", default=None, metavar="N", help="the job name")
