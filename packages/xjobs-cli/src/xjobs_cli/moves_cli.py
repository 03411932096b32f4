"""`xjobs jobs cancel|retry|promote|remove`: on ids (each reported), or on a filter in batches.

A filter (`--where-state`) without `--yes` counts what the verb would move and changes nothing.
With `--yes` it moves batches of `MAX_BULK_BATCH` until nothing remains (or one batch of
`--limit`). Only jobs created before the command started are moved, and no more than the first
batch found, so a verb racing new jobs (or a retried job that dies again) still ends.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
from typing import Any

from xjobs import JobFilter, XJobsError
from xjobs.contract.introspection import MAX_BULK_BATCH
from xjobs.errors import FilterInvalidError
from xjobs.operate import shapes
from xjobs.operate.filters import job_filter
from xjobs.operate.verbs import Verb, count
from xjobs_cli.argtypes import add_job_filters, states
from xjobs_cli.errors import UsageError
from xjobs_cli.output import (
    EXIT_OK,
    EXIT_REFUSED,
    Body,
    emit,
    error_object,
    exit_code,
    print_error,
    progress,
)
from xjobs_cli.target import Subparsers, Target, add_operator_parser, opened, resolve

# -- on ids -----------------------------------------------------------------------------------------


async def _move_ids(verb: Verb, target: Target, args: argparse.Namespace) -> Body:
    results: list[dict[str, Any]] = []
    async with opened(target) as app:
        for job_id in target.operands:
            try:
                record = await verb.one(app.operator, job_id, args.reason)
            except XJobsError as exc:
                if exit_code(exc) != EXIT_REFUSED:
                    raise  # the backend failed: the ids after this one would fail the same way
                results.append({"id": job_id, "ok": False, "error": error_object(exc)})
            else:
                state = "removed" if verb.name == "remove" else record.state
                results.append({"id": job_id, "ok": True, "name": record.name, "state": state})
    refused = sum(1 for r in results if not r["ok"])
    return {"ids": list(target.operands), "results": results, "refused": refused}


def _ids_text(verb: Verb, body: Body) -> str:
    done = [r for r in body["results"] if r["ok"]]
    lines = [f"{verb.done} {r['id']} ({r['name']}): now {r['state']}" for r in done]
    lines.append(f"{len(done)} of {len(body['results'])} {verb.done}")
    return "\n".join(lines)


def _report_refusals(args: argparse.Namespace, body: Body) -> int:
    refused = [r for r in body["results"] if not r["ok"]]
    if not refused:
        return EXIT_OK
    if args.json:
        message = f"{len(refused)} of {len(body['results'])} ids were refused; each is in results"
        print_error(True, refused[0]["error"]["code"], message)
    else:
        for r in refused:
            print_error(False, r["error"]["code"], f"{r['id']}: {r['error']['message']}")
    return EXIT_REFUSED


# -- on a filter ------------------------------------------------------------------------------------


def _filter(verb: Verb, args: argparse.Namespace, now_ms: int) -> JobFilter:
    if not args.where_state:
        raise UsageError(f"--where-state names no state; name the states to {verb.name}")
    where = job_filter(
        states=args.where_state,
        queue=args.queue,
        name=args.name,
        tenant=args.tenant,
        created_before_ms=now_ms + 1,
    )
    outside = [s for s in where.states if s not in verb.states]
    if outside:
        raise FilterInvalidError(
            f"{verb.name} moves only {', '.join(verb.states)} jobs; "
            f"--where-state {', '.join(outside)} names jobs it never moves"
        )
    return where


async def _move_where(verb: Verb, target: Target, args: argparse.Namespace) -> Body:
    async with opened(target) as app:
        op = app.operator
        where = _filter(verb, args, app.clock.now_ms())
        body: dict[str, Any] = {"where": shapes.where(where), "dry_run": not args.yes}
        if not args.yes:
            matched, at_least = await count(verb, op, where, app.clock.now_ms())
            return {**body, "matched": matched, "matched_at_least": at_least}
        limit = args.limit if args.limit is not None else MAX_BULK_BATCH
        moved = batches = 0
        ceiling: int | None = None
        while True:
            result = await verb.many(op, where, limit, args.reason)
            batches += 1
            moved += result.moved
            if ceiling is None:
                ceiling = result.moved + result.remaining
            progress(
                args.json,
                f"{verb.name}: batch {batches} moved {result.moved} "
                f"({moved} in all, {result.remaining} remaining)",
            )
            if (
                args.limit is not None
                or result.remaining == 0
                or result.moved == 0
                or moved >= ceiling
            ):
                break
    return {**body, "moved": moved, "remaining": result.remaining, "batches": batches}


def _describe(where: dict[str, Any]) -> str:
    parts = [f"state {','.join(where['states'])}"]
    parts += [f"{k} {where[k]}" for k in ("queue", "name", "tenant") if where[k] is not None]
    return ", ".join(parts)


def _where_text(verb: Verb, body: Body) -> str:
    what = _describe(body["where"])
    if body["dry_run"]:
        n = f"at least {body['matched']}" if body["matched_at_least"] else str(body["matched"])
        return f"{n} jobs match ({what}); nothing was changed: add --yes to {verb.name} them"
    return (
        f"{verb.done} {body['moved']} jobs ({what}) in {body['batches']} batches; "
        f"{body['remaining']} remaining"
    )


# -- the sub-verb -----------------------------------------------------------------------------------


def _run(verb: Verb, args: argparse.Namespace) -> int:
    target = resolve(args)
    kind = f"jobs.{verb.name}"
    if args.where_state is None:
        if not target.operands:
            raise UsageError(f"{verb.name} what? give job IDs, or --where-state with a filter")
        for flag in ("queue", "name", "tenant", "limit"):
            if getattr(args, flag) is not None:
                raise UsageError(f"--{flag} narrows --where-state; it does not apply to IDs")
        body = asyncio.run(_move_ids(verb, target, args))
        emit(args.json, kind, body, functools.partial(_ids_text, verb))
        return _report_refusals(args, body)
    if target.operands:
        raise UsageError("give job IDs or --where-state, not both")
    body = asyncio.run(_move_where(verb, target, args))
    emit(args.json, kind, body, functools.partial(_where_text, verb))
    return EXIT_OK


def add_parser(verbs: Subparsers, verb: Verb) -> argparse.ArgumentParser:
    """The `xjobs jobs <verb>` subparser: IDs, or `--where-state` with the filter flags."""
    parser = add_operator_parser(
        verbs,
        verb.name,
        help=verb.help,
        description=f"{verb.help[0].upper()}{verb.help[1:]}: the jobs whose IDs are given (each "
        "reported; exit 2 if any was refused), or every job a --where-state filter matches "
        "(only counted unless --yes).",
        operands="[ID ...]",
        run=functools.partial(_run, verb),
    )
    parser.add_argument(
        "--where-state",
        type=states,
        default=None,
        metavar="S,S",
        help=f"move every job in these states ({', '.join(verb.states)}) that the filter matches",
    )
    add_job_filters(parser)
    parser.add_argument(
        "--yes",
        action="store_true",
        help="do it: without --yes a filter only counts what it would move",
    )
    parser.add_argument(
        "--limit",
        type=int,
        default=None,
        metavar="N",
        help=f"move one batch of N (1 to {MAX_BULK_BATCH}) instead of all",
    )
    if verb.name == "cancel":
        parser.add_argument("--reason", default=None, help="why, recorded on the job")
    else:
        parser.set_defaults(reason=None)
    return parser
