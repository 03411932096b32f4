"""One contender's share of a run, in a process of its own: `python -m bench.child SPEC_JSON`.

Prints one JSON line: the library's version and, per workload, its figures (`unsupported` or
`error`) and the seconds it took.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from bench import workloads
from bench.contender import Target, Unsupported, load, opened
from bench.cost import meter
from bench.counting import PostgresStatements, RedisCommands, SqliteCommits, quiesce
from bench.workloads import Figures, Plan


async def idle_cost(contender: Any, counter: Any, warm_s: float, window_s: float) -> Figures:
    """W5: statements (Postgres), commands clients sent (Redis) or commits that wrote the file
    (SQLite) per minute of an idle deployment, after a warm-up; on Redis also every command
    executed, scripts' own included.
    Counted on the contender's own database, so idle deployments can be measured side by side."""
    async with contender.idle():
        await asyncio.sleep(warm_s)
        if isinstance(counter, RedisCommands):
            sent, executed = await counter.sent_in(window_s)
            return {
                "per_minute": sent * 60.0 / window_s,
                "executed_per_minute": executed * 60.0 / window_s,
            }
        if isinstance(counter, SqliteCommits):
            return {"per_minute": await counter.commits_in(window_s) * 60.0 / window_s}
        before = await counter.count()
        await asyncio.sleep(window_s)
        after = await counter.count()
    return {"per_minute": (after - before) * 60.0 / window_s}


async def _nothing() -> None:
    """What a fill on memory or Redis leaves to settle: nothing (Postgres is vacuumed)."""


async def main(spec: dict[str, Any]) -> dict[str, Any]:
    contender = load(spec["contender"])
    target = Target(contender.engine, spec["url"])
    plan = Plan(
        tuple(spec["workloads"]),
        spec["n"],
        spec["fill"],
        spec["w7_jobs"],
        spec["w8_runs"],
        spec["op_calls"],
        spec.get("w10_trips", workloads.LATENCY_JOBS),
        spec.get("w11_children", workloads.W11_CHILDREN),
    )
    settle = (lambda: quiesce(spec["url"])) if contender.engine == "postgres" else _nothing
    counter: Any = None
    if contender.engine == "postgres":
        counter = PostgresStatements(spec["admin_url"], spec["database"])
    elif contender.engine == "redis":
        counter = RedisCommands(spec["url"])
    elif contender.engine == "sqlite":
        counter = SqliteCommits(spec["url"])
    # SQLite has no server: its CPU is the bench process's own
    meter.server = getattr(counter, "server_seconds", None)
    if spec.get("profile"):
        meter.profile_to = Path(spec["profile"])
    runs: dict[str, Any] = {
        "W1": lambda: workloads.w1(contender, plan),
        "W2": lambda: workloads.w2(contender, plan),
        "W3c10": lambda: workloads.w3(contender, plan, 10),
        "W3c100": lambda: workloads.w3(contender, plan, 100),
        "W3c10obs": lambda: workloads.w3_observed(contender, plan, 10),
        "W3c10obs0": lambda: workloads.w3_observed(contender, plan, 10, ratio=0.0),
        "W3c10trace": lambda: workloads.w3_observed(contender, plan, 10, ratio=None),
        "W3c10rate": lambda: workloads.w3_rated(contender, plan, 10),
        "W3p1": lambda: workloads.w3_processes(contender, plan, 1, 10),
        "W3p2": lambda: workloads.w3_processes(contender, plan, 2, 10),
        "W3p4": lambda: workloads.w3_processes(contender, plan, 4, 10),
        "W4": lambda: workloads.w4(contender, plan),
        "W4pool": lambda: workloads.w4_pooled(contender, plan),
        "W5": lambda: idle_cost(contender, counter, spec["warm_s"], spec["idle_s"]),
        "W6": lambda: workloads.w6(contender, plan, lambda: quiesce(spec["url"])),
        "W7": lambda: workloads.w7(contender, plan, counter.used_memory),
        "W8": lambda: workloads.w8(contender, plan),
        "W9": lambda: workloads.w9(contender, plan, lambda: quiesce(spec["url"])),
        "W10": lambda: workloads.w10(contender, plan),
        "W11": lambda: workloads.w11(contender, plan),
        "WOP": lambda: workloads.wop(contender, plan, settle),
    }
    results: dict[str, Any] = {}
    took: dict[str, float] = {}
    async with opened(contender, target):
        for name in plan.workloads:
            started = time.perf_counter()
            meter.label = f"{spec['contender']}-{name}"
            try:
                if counter is None and name in ("W5", "W7"):
                    raise Unsupported("no server to count on")
                results[name] = await runs[name]()
            except Unsupported as exc:
                results[name] = {"unsupported": str(exc)}
            except Exception as exc:
                traceback.print_exc(file=sys.stderr)
                results[name] = {"error": f"{type(exc).__name__}: {exc}"}
            took[name] = time.perf_counter() - started
        version = contender.version()
    return {"version": version, "results": results, "took_s": took}


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING)
    print(json.dumps(asyncio.run(main(json.loads(sys.argv[1])))))
