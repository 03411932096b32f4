"""The benchmark's report: the figures table, the targets of performance.md met or not, the claim
plans, and the operator's reads (WOP) with their statements' plans."""

from __future__ import annotations

from typing import Any

from bench.contender import NOT_YET, engine_of

ENGINES = ("memory", "postgres", "redis", "sqlite")
ORDER = (
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
TITLES = {
    "W1": "W1 enqueue one by one",
    "W2": "W2 bulk enqueue (500)",
    "W3c10": "W3 process, c=10",
    "W3c100": "W3 process, c=100",
    "W3c10obs": "W3 c=10, metrics and tracing on (1 trace in 10 recorded)",
    "W3c10obs0": "W3 c=10, metrics and tracing on (no trace recorded: xjobs's own cost)",
    "W3c10trace": "W3 c=10, metrics and tracing on (every run recorded)",
    "W3c10rate": "W3 c=10, a rate limit far above it",
    "W3p1": "W3 c=10, 1 worker process",
    "W3p2": "W3 c=10 each, 2 worker processes",
    "W3p4": "W3 c=10 each, 4 worker processes",
    "W4": "W4 enqueue→start latency",
    "W4pool": "W4 through pgbouncer (transaction mode)",
    "W5": "W5 idle worker (+ scheduler)",
    "W6": "W6 W3 c=10 beside 1M rows",
    "W7": "W7 Redis memory per job",
    "W8": "W8 three-step run",
    "W9": "W9 W3 c=10 while purging 1M finished rows",
    "W10": "W10 enqueue→result latency",
    "W11": "W11 fan-out: a parent's children, then its continuation",
    "WOP": "WOP operator reads beside the fill",
}
# the figure each ratio is taken of, and whether less is better
PRIMARY = {
    "W1": "jobs_per_s",
    "W2": "jobs_per_s",
    "W3c10": "jobs_per_s",
    "W3c100": "jobs_per_s",
    "W3c10obs": "jobs_per_s",
    "W3c10obs0": "jobs_per_s",
    "W3c10trace": "jobs_per_s",
    "W3c10rate": "jobs_per_s",
    "W3p1": "jobs_per_s",
    "W3p2": "jobs_per_s",
    "W3p4": "jobs_per_s",
    "W4": "p50_ms",
    "W4pool": "p50_ms",
    "W5": "per_minute",
    "W6": "jobs_per_s",
    "W7": "bytes_per_job",
    "W8": "runs_per_s",
    "W9": "jobs_per_s",
    "W10": "p50_ms",
    "W11": "seconds",
    "WOP": "first_filled_p50_ms",
}
# WOP: each read, as the report names it, and the most a read beside the fill may cost (p50)
OP_READS = {
    "first": "first page (50)",
    "dead": "dead in one queue (50)",
    "deep": "page after a deep cursor (50)",
    "queues": "queue counts",
}
OP_MAX_RATIO = 2.0
RESULT_P50_MS = 50.0  # W10: a waiter learns of the settle within 50 ms (Postgres, Redis)
# W5: the idle budget of semantics.md — the worker's 12/min with the wake live, plus the
# scheduler leader's 6 (statements on Postgres; on Redis, commands clients send)
IDLE_BUDGET = {"postgres": 12 + 6, "redis": 12 * 2 + 6}  # a Redis pass: claim + presence, pipelined
# SQLite (issue 42): "near zero" commits that write — the worker's presence refresh (a third of its
# TTL) and the scheduler leader's renewal are the writes an idle deployment keeps
IDLE_BUDGET["sqlite"] = 12
SQLITE_W4_P50_MS = 10.0


def xjobs_name(engine: str) -> str:
    return {
        "memory": "xjobs-memory",
        "postgres": "xjobs-pg",
        "redis": "xjobs-redis",
        "sqlite": "xjobs-sqlite",
    }[engine]


def brief(figures: dict[str, Any]) -> str:
    if "error" in figures:
        return "error: " + str(figures["error"])[:300]
    if "unsupported" in figures:
        return "none (" + str(figures["unsupported"]) + ")"
    parts = []
    for key, value in figures.items():
        if key.startswith("explain") or key in ("reps", "per_rep"):
            continue
        if isinstance(value, float):
            parts.append(f"{key}={value:,.3f}" if abs(value) < 10 else f"{key}={value:,.1f}")
        else:
            parts.append(f"{key}={value}")
    return " ".join(parts)


def figure(workload: str, f: dict[str, Any], w3: dict[str, Any] | None) -> str:
    if "error" in f:
        return "error"
    if "unsupported" in f:
        return "not yet" if str(f["unsupported"]).startswith(NOT_YET) else "none"
    if workload == "W11":
        return f"{f['seconds']:,.2f} s"
    if workload in ("W4", "W4pool", "W10"):
        return f"{f['p50_ms']:.1f} / {f['p99_ms']:.1f} ms"
    if workload == "W5":
        return f"{f['per_minute']:.0f} /min"
    if workload == "W7":
        return f"{f['bytes_per_job']:,.0f} B/job"
    if workload == "W8":
        reads = f.get("step_reads_per_run")  # a peer's reads are not counted
        text = f"{f['runs_per_s']:,.0f} runs/s; {f['step_writes_per_run']:.1f} step writes"
        return text + (f", {reads:.1f} reads per run" if reads is not None else " per run")
    if workload == "WOP":
        ratios = op_ratios(f)
        return "p50 filled/empty: " + ", ".join(
            f"{read} {p50:,.2f}×" for read, (p50, _) in ratios.items()
        )
    text = f"{f['jobs_per_s']:,.0f} jobs/s"
    if (
        workload in ("W6", "W3c10obs", "W3c10obs0", "W3c10trace", "W3c10rate", "W9", "W3p2", "W3p4")
        and w3
        and "jobs_per_s" in w3
    ):
        text += f" ({f['jobs_per_s'] / w3['jobs_per_s']:.2f}× W3)"
    if workload == "W9" and "purged" in f:
        text += f"; purged {f['purged']:,} rows in {f['purge_s']:.0f} s"
    return text


def _value(results: dict[str, Any], name: str, workload: str) -> float | None:
    f = results.get(name, {}).get(workload, {})
    value = f.get(PRIMARY[workload])
    return float(value) if isinstance(value, (int, float)) else None


def _ratio(a: float | None, b: float | None) -> str:
    if a is None or b is None or b == 0:
        return ""
    return f"{a / b:.2f}"


def spread(mine: dict[str, Any], theirs: dict[str, Any]) -> tuple[float, float] | None:
    """The lowest and highest ratio of one repetition's figure to the other's in the same
    repetition (the contenders alternate within each), over the repetitions both have."""
    ratios = [
        a / b
        for a, b in zip(mine.get("per_rep", ()), theirs.get("per_rep", ()), strict=False)
        if isinstance(a, (int, float)) and isinstance(b, (int, float)) and b
    ]
    if len(ratios) < 2:
        return None
    return min(ratios), max(ratios)


def _ratio_cell(results: dict[str, Any], name: str, other: str, workload: str) -> str:
    """The ratio of the medians, and its spread over the repetitions (lowest–highest)."""
    text = _ratio(_value(results, name, workload), _value(results, other, workload))
    mine = results.get(name, {}).get(workload, {})
    theirs = results.get(other, {}).get(workload, {})
    found = spread(mine, theirs) if text and name != other else None
    return f"{text} ({found[0]:.2f}–{found[1]:.2f})" if found else text


def cost(f: dict[str, Any]) -> str:
    """CPU seconds per 1,000 jobs: the process's, then the server's where there is one."""
    if "cpu_s_per_1k" not in f:
        return ""
    text = f"{f['cpu_s_per_1k']:.3f}"
    if "server_s_per_1k" in f:
        text += f" / {f['server_s_per_1k']:.3f}"
    return text


def table(results: dict[str, Any]) -> list[str]:
    lines = [
        "| workload | backend | library | figure | ratio to xjobs | ratio to ceiling "
        "| CPU s per 1,000 jobs: process / server |",
        "|---|---|---|---|---|---|---|",
    ]
    for workload in ORDER:
        for engine in ENGINES:
            names = [n for n in results if engine_of(n) == engine and workload in results[n]]
            names.sort(key=lambda n: (not n.startswith("xjobs"), n.startswith("ceiling"), n))
            for name in names:
                f = results[name][workload]
                ceiling = "ceiling-" + _short(engine)
                lines.append(
                    f"| {TITLES[workload]} | {engine} | {name} | "
                    f"{figure(workload, f, results[name].get('W3c10'))} | "
                    f"{_ratio_cell(results, name, xjobs_name(engine), workload)} | "
                    f"{_ratio_cell(results, name, ceiling, workload)} | {cost(f)} |"
                )
    return lines


def _short(engine: str) -> str:
    return {"memory": "memory", "postgres": "pg", "redis": "redis", "sqlite": "sqlite"}[engine]


def targets(results: dict[str, Any]) -> list[dict[str, Any]]:
    """Each target of performance.md that this run measured: the measured ratio, met or not."""
    return [
        *_throughput_targets(results),
        *_telemetry_targets(results),
        *_latency_targets(results),
        *_idle_targets(results),
        *_storage_targets(results),
        *_step_targets(results),
        *_operator_targets(results),
    ]


def _target(target: str, measured: str, met: bool) -> dict[str, Any]:
    return {"target": target, "measured": measured, "met": met}


# performance.md's throughput targets: (engine, workload) -> (least ratio to the ceiling, least
# ratio to the best peer); 1.0 to the peer is "ahead of every peer", None where it sets none
THROUGHPUT_TARGETS: dict[tuple[str, str], tuple[float | None, float | None]] = {
    ("postgres", "W1"): (0.9, 1.0),
    ("postgres", "W2"): (0.5, 1.0),
    ("postgres", "W3c10"): (0.6, None),
    ("postgres", "W3c100"): (0.5, 1.5),
    ("redis", "W1"): (0.9, 1.0),
    ("redis", "W2"): (0.5, None),
    ("redis", "W3c10"): (None, 1.5),
    ("redis", "W3c100"): (0.3, 1.5),
    # issue 42: ahead of every SQLite peer on every row (the ceiling's ratio is information)
    ("sqlite", "W1"): (None, 1.0),
    ("sqlite", "W2"): (None, 1.0),
    ("sqlite", "W3c10"): (None, 1.0),
    ("sqlite", "W3c100"): (None, 1.0),
}
# issue 42: W3 c=10 on SQLite in one worker process, jobs a second
SQLITE_W3_FLOOR = 3000.0


def _throughput_targets(results: dict[str, Any]) -> list[dict[str, Any]]:
    """W1-W3 on each server, against the best peer and the raw ceiling, as performance.md sets them
    (and issue 42 for SQLite, with its floor for W3 c=10)."""
    out: list[dict[str, Any]] = []
    w3 = _value(results, "xjobs-sqlite", "W3c10")
    if w3 is not None:
        out.append(
            _target(
                f"W3c10 sqlite: ≥ {SQLITE_W3_FLOOR:,.0f} jobs/s in one worker process",
                f"{w3:,.0f} jobs/s",
                w3 >= SQLITE_W3_FLOOR,
            )
        )
    for (engine, workload), (to_ceiling, to_peer) in THROUGHPUT_TARGETS.items():
        mine = _value(results, xjobs_name(engine), workload)
        if mine is None:
            continue
        peers = {
            n: v
            for n in results
            if engine_of(n) == engine
            and not n.startswith(("xjobs", "ceiling"))
            and (v := _value(results, n, workload)) is not None
        }
        if peers and to_peer is not None:
            best = max(peers, key=lambda n: peers[n])
            ratio = mine / peers[best]
            what = "ahead of the best peer" if to_peer == 1.0 else f"≥ {to_peer}× the best peer"
            out.append(
                _target(
                    f"{workload} {engine}: {what}",
                    f"{ratio:.2f}× ({best})",
                    ratio > to_peer if to_peer == 1.0 else ratio >= to_peer,
                )
            )
        ceiling = _value(results, "ceiling-" + _short(engine), workload)
        if ceiling and to_ceiling is not None:
            out.append(
                _target(
                    f"{workload} {engine}: ≥ {to_ceiling}× the ceiling",
                    f"{mine / ceiling:.2f}×",
                    mine / ceiling >= to_ceiling,
                )
            )
    return out


def _telemetry_targets(results: dict[str, Any]) -> list[dict[str, Any]]:
    """W3 c=10 with metrics and tracing on (one trace in ten recorded, and none), and with a rate
    limit far above it: each within 10% of W3 c=10 without, on each server."""
    out: list[dict[str, Any]] = []
    for workload, what in (
        ("W3c10obs", "metrics and tracing"),
        ("W3c10obs0", "metrics and tracing, no trace recorded"),
        ("W3c10rate", "a rate limit"),
    ):
        for engine in ENGINES:
            on = _value(results, xjobs_name(engine), workload)
            off = _value(results, xjobs_name(engine), "W3c10")
            if on is not None and off:
                out.append(
                    _target(
                        f"W3 c=10 {engine} with {what}: ≥ 0.9× W3 c=10",
                        f"{on / off:.2f}×",
                        on / off >= 0.9,
                    )
                )
    return out


def _latency_targets(results: dict[str, Any]) -> list[dict[str, Any]]:
    """W4: enqueue-to-start latency percentiles of xjobs on each server; W10: enqueue-to-result."""
    out: list[dict[str, Any]] = []
    for engine, (p50, p99) in (("postgres", (5.0, 25.0)), ("redis", (2.0, 10.0))):
        f = results.get(xjobs_name(engine), {}).get("W4", {})
        if "p50_ms" in f:
            out.append(
                _target(
                    f"W4 {engine}: p50 < {p50:g} ms, p99 < {p99:g} ms",
                    f"{f['p50_ms']:.1f} / {f['p99_ms']:.1f} ms",
                    f["p50_ms"] < p50 and f["p99_ms"] < p99,
                )
            )
    # issue 42: enqueued by another connection, woken by the data_version poll (no p99 set)
    f = results.get("xjobs-sqlite", {}).get("W4", {})
    if "p50_ms" in f:
        out.append(
            _target(
                f"W4 sqlite: p50 < {SQLITE_W4_P50_MS:g} ms across connections",
                f"{f['p50_ms']:.1f} / {f['p99_ms']:.1f} ms",
                f["p50_ms"] < SQLITE_W4_P50_MS,
            )
        )
    # W10: "a waiter learns of the settle within 50 ms on Postgres and Redis"
    for engine in ("postgres", "redis"):
        f = results.get(xjobs_name(engine), {}).get("W10", {})
        if "p50_ms" in f:
            out.append(
                _target(
                    f"W10 {engine}: enqueue→result p50 < {RESULT_P50_MS:g} ms",
                    f"{f['p50_ms']:.1f} / {f['p99_ms']:.1f} ms",
                    f["p50_ms"] < RESULT_P50_MS,
                )
            )
    return out


def _idle_targets(results: dict[str, Any]) -> list[dict[str, Any]]:
    """W5: the statements an idle worker and scheduler cost each server per minute."""
    out: list[dict[str, Any]] = []
    for engine, budget in IDLE_BUDGET.items():
        f = results.get(xjobs_name(engine), {}).get("W5", {})
        if "per_minute" in f:
            out.append(
                _target(
                    f"W5 {engine}: ≤ {budget}/min idle (worker + scheduler)",
                    f"{f['per_minute']:.0f}/min",
                    f["per_minute"] <= budget,
                )
            )
    return out


def _storage_targets(results: dict[str, Any]) -> list[dict[str, Any]]:
    """W6 (throughput over a filled table) on Postgres and W7 (memory per job) on Redis."""
    out: list[dict[str, Any]] = []
    w6 = _value(results, "xjobs-pg", "W6")
    w3 = _value(results, "xjobs-pg", "W3c10")
    if w6 is not None and w3:
        out.append(_target("W6 postgres: ≥ 0.85× W3", f"{w6 / w3:.2f}×", w6 / w3 >= 0.85))
    w9 = _value(results, "xjobs-pg", "W9")
    if w9 is not None and w3:
        out.append(
            _target("W9 postgres: ≥ 0.8× W3 while purging", f"{w9 / w3:.2f}×", w9 / w3 >= 0.8)
        )
    w7 = _value(results, "xjobs-redis", "W7")
    if w7 is not None:
        out.append(_target("W7 redis: < 1 KiB per small job", f"{w7:,.0f} B", w7 < 1024))
    return out


def _step_targets(results: dict[str, Any]) -> list[dict[str, Any]]:
    """W8: step store writes and reads per run of a three-step job."""
    out: list[dict[str, Any]] = []
    for engine in ENGINES:
        f = results.get(xjobs_name(engine), {}).get("W8", {})
        if "step_writes_per_run" in f:
            writes, reads = f["step_writes_per_run"], f["step_reads_per_run"]
            out.append(
                _target(
                    f"W8 {engine}: one step write per step, ≤ one hydrate per run",
                    f"{writes:.2f} writes (3 steps), {reads:.2f} reads per run",
                    writes <= 3.0 and reads <= 1.0,
                )
            )
    return out


def op_ratios(f: dict[str, Any]) -> dict[str, tuple[float, float]]:
    """WOP: each read's p50 and p99 beside the fill over the same on the empty table."""
    out: dict[str, tuple[float, float]] = {}
    for read in OP_READS:
        ratio = [
            f[f"{read}_filled_{p}_ms"] / f[f"{read}_empty_{p}_ms"]
            for p in ("p50", "p99")
            if f.get(f"{read}_empty_{p}_ms") and f"{read}_filled_{p}_ms" in f
        ]
        if len(ratio) == 2:
            out[read] = (ratio[0], ratio[1])
    return out


def _operator_targets(results: dict[str, Any]) -> list[dict[str, Any]]:
    """WOP: every operator read beside the fill within OP_MAX_RATIO× of the empty table (p50)."""
    out: list[dict[str, Any]] = []
    for engine in ENGINES:
        f = results.get(xjobs_name(engine), {}).get("WOP", {})
        ratios = op_ratios(f)
        if not ratios:
            continue
        worst = max(ratios, key=lambda read: ratios[read][0])
        listed = ", ".join(f"{read} {p50:,.2f}×" for read, (p50, _) in ratios.items())
        out.append(
            _target(
                f"WOP {engine}: the jobs pages and the queue counts beside {f['fill']:,} rows "
                f"≤ {OP_MAX_RATIO:g}× the empty table (p50)",
                f"worst {ratios[worst][0]:,.2f}× ({worst}); {listed}",
                ratios[worst][0] <= OP_MAX_RATIO and "odd" not in f,
            )
        )
    return out


def _operator_section(results: dict[str, Any]) -> list[str]:
    """WOP: each read's figures per backend on both tables, and the plans of their statements."""
    runs = {
        engine: f
        for engine in ENGINES
        if op_ratios(f := results.get(xjobs_name(engine), {}).get("WOP", {}))
    }
    if not runs:
        return []
    lines = [
        "## WOP: the operator's reads, on its own rows alone and beside the fill",
        "",
        "| backend | read | empty p50 / p99 | beside the fill p50 / p99 | ratio p50 | ratio p99 "
        "| calls |",
        "|---|---|---|---|---|---|---|",
    ]
    for engine, f in runs.items():
        for read, (p50, p99) in op_ratios(f).items():
            empty, filled = (
                f"{f[f'{read}_{t}_p50_ms']:,.2f} / {f[f'{read}_{t}_p99_ms']:,.2f} ms"
                for t in ("empty", "filled")
            )
            calls = f"{f[f'{read}_empty_calls']:.0f} / {f[f'{read}_filled_calls']:.0f}"
            lines.append(
                f"| {engine} | {OP_READS[read]} | {empty} | {filled} | {p50:,.2f}× | {p99:,.2f}× "
                f"| {calls} |"
            )
    lines.append("")
    for engine, f in runs.items():
        notes = [f"{engine}: the fill of {f['fill']:,} rows took {f['fill_s']:.1f} s"]
        notes.append(f"counts {f.get('counts_empty', '')} → {f.get('counts_filled', '')}")
        compiled = [OP_READS[r] for r in OP_READS if "\nJIT:" in f.get(f"explain_{r}", "")]
        if compiled:
            notes.append("the server JIT-compiles the statement of: " + ", ".join(compiled))
        if "odd" in f:
            notes.append(f"NOT COMPARABLE: {f['odd']}")
        lines.append("- " + "; ".join(notes) + ".")
    lines.append("")
    for engine, f in runs.items():
        plans = [(read, f[f"explain_{read}"]) for read in OP_READS if f"explain_{read}" in f]
        if plans:
            lines += [f"### {xjobs_name(engine)}: the statements beside {f['fill']:,} rows", ""]
            for read, plan in plans:
                lines += [f"{OP_READS[read]}:", "", "```", plan, "```", ""]
    return lines


def _took(took: dict[str, float]) -> list[str]:
    """The run's wall time and each workload's share (every contender and repetition summed)."""
    if "run" not in took:
        return []
    shares = ", ".join(f"{w} {took[w]:.0f} s" for w in ORDER if w in took)
    return [
        f"The run took {took['run'] / 60:.1f} minutes ({shares}; the rest is process start-up)."
    ]


def _slow(settings: dict[str, Any]) -> str:
    """The peers that ran on a smaller n of their own, if any."""
    slow = settings.get("slow_n") or {}
    if not slow:
        return ""
    return " (" + ", ".join(f"{name} {n:,}" for name, n in sorted(slow.items())) + ")"


def markdown(data: dict[str, Any]) -> str:
    machine = data["machine"]
    servers = ", ".join(f"{k} {v}" for k, v in data["servers"].items())
    versions = ", ".join(f"{k} {v}" for k, v in sorted(data["versions"].items()))
    settings = data["settings"]
    lines = [
        f"# xjobs benchmark — {data['date']}",
        "",
        f"Machine: {machine['nproc']} cores, Python {machine['python']}, {machine['platform']}. "
        f"Servers: {servers}.",
        f"Libraries: {versions}.",
        f"Settings: n={settings['n']}{_slow(settings)}, median of {settings['reps']} repetitions "
        f"({', '.join(settings['once'])} once), W6 fill {settings['fill']:,} rows, "
        f"W7 {settings['w7_jobs']:,} jobs, W8 {settings['w8_runs']:,} runs, "
        f"W10 {settings.get('w10_trips', 200):,} round trips, "
        f"W11 {settings.get('w11_children', 10_000):,} children, "
        f"WOP {settings.get('op_calls', 0):,} calls a read. "
        "Ratios are this figure over xjobs's (or the ceiling's) on the same engine: above 1 is "
        "faster for throughput, slower for W4, W10 and W11, costlier for W5 and W7; in "
        "brackets, the lowest and highest ratio of one repetition's figures. CPU seconds per "
        "1,000 jobs (runs for W8, round trips for W10, children for W11): the benchmark "
        "process's, user and system, with the worker processes a peer starts (Celery, RQ), over "
        "the measured window; then the server's — on Postgres the time it spent executing "
        "the contender's statements (pg_stat_statements), on Redis the server process's CPU "
        "(INFO cpu).",
        *_took(data.get("took_s", {})),
        "",
        *table(data["results"]),
        "",
    ]
    if data["skipped"]:
        lines += ["Not run: " + "; ".join(f"{k} ({v})" for k, v in data["skipped"].items()), ""]
    if data.get("targets"):
        lines += ["## Targets (performance.md)", "", "| target | measured | met |", "|---|---|---|"]
        lines += [
            f"| {t['target']} | {t['measured']} | {'met' if t['met'] else 'not met'} |"
            for t in data["targets"]
        ]
        lines.append("")
    plans = {
        n: r["W6"]["explain"] for n, r in data["results"].items() if "explain" in r.get("W6", {})
    }
    if plans:
        lines += ["## W6: the claim's plan beside the filled table", ""]
        for name, plan in sorted(plans.items()):
            lines += [f"### {name}", "", "```", plan, "```", ""]
    lines += _operator_section(data["results"])
    return "\n".join(lines)
