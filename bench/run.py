"""The benchmark's entry point (`python -m bench`): start the servers, run every contender in
alternation, write `bench/results/latest.md`, `.json` and `.svg`."""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import platform
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import asyncpg
from redis.asyncio import Redis

from bench import picture, report
from bench.contender import ADAPTERS, OWN_VENV, engine_of, load

WORKLOADS = (
    "W1",
    "W2",
    "W3c10",
    "W3c100",
    "W3c10obs",
    "W3c10obs0",
    "W3c10trace",
    "W3c10rate",
    "W3p1",
    "W3p2",
    "W3p4",
    "W4",
    "W4pool",
    "W5",
    "W6",
    "W7",
    "W8",
    "W9",
    "W10",
    "W11",
    "WOP",
)
# slow to set up (or, W10, slow on the polling peers: arq ~0.5 s, saq ~1 s a round trip) and
# steady: measured in the first repetition only
ONCE = ("W5", "W6", "W7", "W9", "W10", "W11", "WOP")
# the operator surface, its telemetry, the retention purge: no peer has them (W8's durable steps:
# DBOS has them, the others answer none)
XJOBS_ONLY = (
    "WOP",
    "W3c10obs",
    "W3c10obs0",
    "W3c10trace",
    "W3c10rate",
    "W3p1",
    "W3p2",
    "W3p4",
    "W4pool",
    "W9",
)
ENGINE_ONLY = {"W6": "postgres", "W7": "redis", "W9": "postgres", "W4pool": "postgres"}
BACKENDS = ("memory", "postgres", "redis", "sqlite")
# peers that cannot finish W1–W3 on `--n` jobs within the run's budget (each a few hundred jobs a
# second on this machine, DBOS below a hundred): they run on `--slow-n` jobs of their own, timed
# the same way
SLOW_PEERS = ("procrastinate", "saq-pg", "arq", "celery", "rq", "dbos-pg", "dbos-sqlite")
CHILD_TIMEOUT_S = 3600
RESULTS = Path(__file__).with_name("results")
# `--quick`: the headline rows, xjobs on each backend and the best peer of each (by the full runs
# of bench/results), on a small n, once: a contributor's check in under 5 minutes
QUICK_WORKLOADS = ("W1", "W2", "W3c10", "W4")
QUICK_LIBRARIES = (
    "xjobs-memory",
    "xjobs-pg",
    "pgqueuer",
    "xjobs-redis",
    "saq-redis",
    "huey-redis",
    "xjobs-sqlite",
    "huey-sqlite",
)
QUICK_N = 2000
QUICK_SLOW_N = 500
QUICK_OUT = Path(tempfile.gettempdir()) / "xjobs-bench-quick"


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument(
        "--workloads",
        default=",".join(WORKLOADS),
        help="comma list of W1…W11, WOP, W3p1, W3p2, W3p4 and W4pool (W3 runs the in-process "
        "W3 variants: c=10, c=100, with telemetry, with a rate limit)",
    )
    parser.add_argument(
        "--backends", default=",".join(BACKENDS), help="comma list of " + ", ".join(BACKENDS)
    )
    parser.add_argument(
        "--libraries",
        default="",
        help="comma list of contenders (default: all): " + ", ".join(ADAPTERS),
    )
    parser.add_argument("-n", "--n", type=int, default=10_000, help="jobs per W1/W2/W3/W6 run")
    parser.add_argument(
        "--slow-n",
        type=int,
        default=2000,
        help="jobs per run of the slow peers (" + ", ".join(SLOW_PEERS) + "), at most --n",
    )
    parser.add_argument(
        "--profile",
        type=Path,
        default=None,
        metavar="DIR",
        help="sample each measured window with pyinstrument: DIR/<library>-<workload>.top.txt "
        "(the frames by own time) and .tree.txt (the call tree); the figures then carry "
        "the profiler's cost",
    )
    parser.add_argument("--reps", type=int, default=3, help="repetitions; the median is reported")
    parser.add_argument(
        "--fill",
        type=int,
        default=1_000_000,
        help="W6 and WOP: other rows in the table; W9: the finished rows purged",
    )
    parser.add_argument("--w7-jobs", type=int, default=100_000, help="W7: stored jobs on Redis")
    parser.add_argument("--w8-runs", type=int, default=1000, help="W8: three-step runs")
    parser.add_argument(
        "--op-calls",
        type=int,
        default=200,
        help="WOP: timed calls of each read on each table (fewer when they pass 10 s)",
    )
    parser.add_argument(
        "--w10-trips", type=int, default=200, help="W10: enqueue→result round trips"
    )
    parser.add_argument(
        "--w11-children", type=int, default=10_000, help="W11: the children of the fan-out"
    )
    parser.add_argument(
        "--idle-seconds", type=float, default=30.0, help="W5: the counted idle window"
    )
    parser.add_argument(
        "--warm-seconds", type=float, default=6.0, help="W5: idle time before counting"
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help=f"where latest.md, .json and .svg go (default {RESULTS}; with --quick {QUICK_OUT})",
    )
    parser.add_argument(
        "--peers-python",
        default="",
        help="the interpreter of the venv the peers that need redis-py 6+ run in: "
        + ", ".join(sorted(OWN_VENV))
        + " (default: this one)",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="the headline rows only (" + ", ".join(QUICK_WORKLOADS) + "), xjobs and the best "
        f"peer of each backend, n={QUICK_N}, one repetition (--backends still narrows it)",
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.workloads = ",".join(QUICK_WORKLOADS)
        args.libraries = args.libraries or ",".join(QUICK_LIBRARIES)
        args.n, args.slow_n, args.reps = QUICK_N, QUICK_SLOW_N, 1
    if args.out is None:
        args.out = QUICK_OUT if args.quick else RESULTS
    chosen = [w.strip() for w in args.workloads.split(",") if w.strip()]
    args.workloads = [
        w for w in WORKLOADS if w in chosen or (w.startswith("W3c") and "W3" in chosen)
    ]
    unknown = set(chosen) - set(WORKLOADS) - {"W3"}
    if unknown:
        parser.error(f"unknown workloads: {sorted(unknown)}")
    args.backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    if set(args.backends) - set(BACKENDS):
        parser.error(f"unknown backends: {sorted(set(args.backends) - set(BACKENDS))}")
    names = [n.strip() for n in args.libraries.split(",") if n.strip()] or list(ADAPTERS)
    if set(names) - set(ADAPTERS):
        parser.error(f"unknown libraries: {sorted(set(names) - set(ADAPTERS))}")
    args.libraries = names
    return args


def applicable(name: str, workloads: list[str]) -> list[str]:
    engine = engine_of(name)
    out = [w for w in workloads if ENGINE_ONLY.get(w, engine) == engine]
    if engine == "memory" or name.startswith("ceiling"):
        out = [w for w in out if w != "W5"]  # no server to count on; a ceiling does not idle
    if name.startswith("ceiling"):
        # no steps to record, no results to wait for, no children
        out = [w for w in out if w not in ("W8", "W10", "W11")]
    if not name.startswith("xjobs"):
        out = [w for w in out if w not in XJOBS_ONLY]
    return out


def python_for(name: str, args: argparse.Namespace) -> str:
    """The interpreter a contender's child runs on: the peers' own venv for those of OWN_VENV."""
    return str(args.peers_python or sys.executable) if name in OWN_VENV else sys.executable


def importable(name: str, python: str = sys.executable) -> str | None:
    """None when the contender's library imports on `python`, else why not."""
    if python != sys.executable:
        probe = f"from bench.contender import load; load({name!r})"
        done = subprocess.run(
            [python, "-c", probe],
            cwd=Path(__file__).parent.parent,
            capture_output=True,
            text=True,
            check=False,
        )
        lines = done.stderr.strip().splitlines()
        return None if done.returncode == 0 else f"not installed: {lines[-1] if lines else python}"
    try:
        load(name)
    except ImportError as exc:
        return f"not installed: {exc}"
    return None


class Servers:
    """The servers of the run, started through the test fixtures; a scratch target per contender."""

    def __init__(self, backends: list[str]) -> None:
        self.postgres = self.redis = self.sqlite = ""
        if "sqlite" in backends:  # a file a contender, in a directory of the run's own
            self.sqlite = tempfile.mkdtemp(prefix="xjobs-bench-sqlite-")
        if "postgres" in backends:
            from xjobs_pg.servers import postgres_url

            self.postgres = postgres_url()
        if "redis" in backends:
            from xjobs_redis.servers import redis_url

            self.redis = redis_url()

    async def target(self, name: str, engine: str, index: int) -> dict[str, str]:
        if engine == "memory":
            return {"url": "memory://"}
        if engine == "sqlite":  # afresh: the file of the last repetition and its WAL go
            folder = Path(self.sqlite) / name
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            return {"url": f"sqlite:///{folder / 'bench.db'}"}
        if engine == "redis":
            url = urlsplit(self.redis)._replace(path=f"/{index}").geturl()
            client = Redis.from_url(url)
            try:
                await client.flushdb()
            finally:
                await client.aclose()
            return {"url": url}
        database = "bench_" + name.replace("-", "_")  # from the registry's names: [a-z_]
        assert database.replace("_", "").isalnum()
        conn = await asyncpg.connect(self.postgres)
        try:
            await conn.execute(f'drop database if exists "{database}" with (force)')
            await conn.execute(f'create database "{database}"')
        finally:
            await conn.close()
        url = urlsplit(self.postgres)._replace(path=f"/{database}").geturl()
        return {"url": url, "admin_url": self.postgres, "database": database}

    async def versions(self) -> dict[str, str]:
        found: dict[str, str] = {}
        if self.sqlite:
            found["sqlite"] = sqlite3.sqlite_version
        if self.postgres:
            conn = await asyncpg.connect(self.postgres)
            try:
                found["postgres"] = await conn.fetchval("show server_version")
                found["postgres fsync"] = await conn.fetchval("show fsync")
            finally:
                await conn.close()
        if self.redis:
            client = Redis.from_url(self.redis)
            try:
                found["redis"] = str((await client.info("server"))["redis_version"])
            finally:
                await client.aclose()
        return found


async def run_child(spec: dict[str, Any], python: str = sys.executable) -> dict[str, Any]:
    process = await asyncio.create_subprocess_exec(
        *(python, "-m", "bench.child", json.dumps(spec)),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=Path(__file__).parent.parent,
    )
    try:
        async with asyncio.timeout(CHILD_TIMEOUT_S):
            out, err = (b.decode() for b in await process.communicate())
    except TimeoutError:
        process.kill()
        out, err = "", f"the child ran past {CHILD_TIMEOUT_S} s"
    lines = out.strip().splitlines()
    if process.returncode != 0 or not lines:
        tail = (err or out).strip().splitlines()[-5:]
        return {
            "version": "?",
            "results": {w: {"error": " | ".join(tail)} for w in spec["workloads"]},
        }
    if err.strip():
        print(err.strip()[-2000:], file=sys.stderr)
    result: dict[str, Any] = json.loads(lines[-1])
    return result


def medians(samples: list[dict[str, Any]], primary: str | None = None) -> dict[str, Any]:
    """The median of each numeric figure over repetitions; the first text figure (a plan) kept;
    the `primary` figure of each repetition, in repetition order, as `per_rep` (a failed
    repetition as None), so a ratio can carry its spread."""
    failed = [s for s in samples if "error" in s or "unsupported" in s]
    if failed and len(failed) == len(samples):
        return failed[0]
    ok = [s for s in samples if s not in failed]
    out: dict[str, Any] = {"reps": len(ok)}
    for key in ok[0]:
        values = [s[key] for s in ok if key in s]
        out[key] = statistics.median(values) if isinstance(values[0], (int, float)) else values[0]
    if primary is not None and primary in ok[0]:
        out["per_rep"] = [None if s in failed else s.get(primary) for s in samples]
    return out


async def bench(args: argparse.Namespace) -> dict[str, Any]:
    servers = Servers(args.backends)
    skipped: dict[str, str] = {}
    contenders: list[str] = []
    for name in args.libraries:
        if engine_of(name) not in args.backends:
            continue
        why = importable(name, python_for(name, args))
        if why is None:
            contenders.append(name)
        else:
            skipped[name] = why
    samples: dict[str, dict[str, list[dict[str, Any]]]] = defaultdict(lambda: defaultdict(list))
    versions: dict[str, str] = {}
    took: dict[str, float] = defaultdict(float)
    started = time.perf_counter()

    def record(name: str, answer: dict[str, Any]) -> None:
        versions[name] = answer["version"]
        for workload, figures in answer["results"].items():
            samples[name][workload].append(figures)
            seconds = answer.get("took_s", {}).get(workload, 0.0)
            took[workload] += seconds
            print(f"  {name} {workload} ({seconds:.1f} s): {report.brief(figures)}", flush=True)

    async def spec(name: str, workloads: list[str]) -> dict[str, Any]:
        # a Redis contender's logical db: Redis has 16 (db 0 left alone)
        same_engine = [n for n in contenders if engine_of(n) == engine_of(name)]
        return {
            "contender": name,
            "workloads": workloads,
            "n": jobs_for(name, args),
            "profile": str(args.profile) if args.profile is not None else "",
            "fill": args.fill,
            "w7_jobs": args.w7_jobs,
            "w8_runs": args.w8_runs,
            "op_calls": args.op_calls,
            "w10_trips": args.w10_trips,
            "w11_children": args.w11_children,
            "idle_s": args.idle_seconds,
            "warm_s": args.warm_seconds,
            **await servers.target(name, engine_of(name), 1 + same_engine.index(name)),
        }

    idle = [name for name in contenders if "W5" in applicable(name, args.workloads)]
    if idle:  # each counted on its own database: every idle deployment at once
        print(f"W5 side by side: {', '.join(idle)}", flush=True)
        specs = [await spec(name, ["W5"]) for name in idle]
        phase = time.perf_counter()
        children = [run_child(s, python_for(n, args)) for n, s in zip(idle, specs, strict=True)]
        for name, answer in zip(idle, await asyncio.gather(*children), strict=True):
            record(name, answer)
        took["W5"] = time.perf_counter() - phase  # side by side: the phase's wall time
    for rep in range(args.reps):
        order = contenders[rep % len(contenders) :] + contenders[: rep % len(contenders)]
        for index, name in enumerate(order):
            workloads = [
                w
                for w in applicable(name, args.workloads)
                if w != "W5" and (rep == 0 or w not in ONCE)
            ]
            if not workloads:
                continue
            print(
                f"rep {rep + 1}/{args.reps} #{index + 1} {name}: {', '.join(workloads)}", flush=True
            )
            record(name, await run_child(await spec(name, workloads), python_for(name, args)))
    results = {
        name: {
            workload: medians(s, report.PRIMARY.get(workload))
            for workload, s in by_workload.items()
        }
        for name, by_workload in samples.items()
    }
    return {
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "machine": {
            "nproc": os.cpu_count(),
            "python": platform.python_version(),
            "platform": platform.platform(),
        },
        "servers": await servers.versions(),
        "versions": versions,
        "skipped": skipped,
        "settings": {
            "n": args.n,
            "slow_n": {name: jobs_for(name, args) for name in contenders if name in SLOW_PEERS},
            "reps": args.reps,
            "fill": args.fill,
            "w7_jobs": args.w7_jobs,
            "w8_runs": args.w8_runs,
            "op_calls": args.op_calls,
            "w10_trips": args.w10_trips,
            "w11_children": args.w11_children,
            "idle_seconds": args.idle_seconds,
            "once": list(ONCE),
        },
        "results": results,
        "took_s": {"run": time.perf_counter() - started, **took},
    }


def jobs_for(name: str, args: argparse.Namespace) -> int:
    """The jobs of one W1/W2/W3/W6 run of `name`: `--n`, or a slow peer's own `--slow-n`."""
    return min(args.n, args.slow_n) if name in SLOW_PEERS else int(args.n)


def print_profiles(directory: Path) -> None:
    """Each profiled window's top frames, as `Meter` wrote them."""
    for top in sorted(directory.glob("*.top.txt")):
        print(f"\n## {top.name.removesuffix('.top.txt')}\n\n{top.read_text()}")


def main(argv: list[str] | None = None) -> int:
    args = parse(sys.argv[1:] if argv is None else argv)
    data = asyncio.run(bench(args))
    data["targets"] = report.targets(data["results"])
    args.out.mkdir(parents=True, exist_ok=True)
    markdown = report.markdown(data)
    (args.out / "latest.json").write_text(json.dumps(data, indent=2) + "\n")
    (args.out / "latest.md").write_text(markdown)
    print(markdown)
    print(picture.write(data, args.out / "latest.svg"))
    if args.profile is not None:
        print_profiles(args.profile)
    return 0
