"""The bench's picture: a bar chart per workload, xjobs against each peer and the ceiling, from a
run's results (`python -m bench.picture results.json out.svg` redraws a saved run)."""

from __future__ import annotations

import importlib
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.contender import NOT_YET, engine_of
from bench.report import ENGINES, PRIMARY, TITLES

# the workloads a peer runs too, in the order drawn; the xjobs-only rows stay in the table
PICTURED = ("W1", "W2", "W3c10", "W3c100", "W4", "W5", "W7", "W8", "W10", "W11")
UNITS = {"jobs_per_s": "jobs/s", "runs_per_s": "runs/s", "p50_ms": "p50 ms", "seconds": "s",
         "per_minute": "per minute", "bytes_per_job": "bytes a job"}  # fmt: skip
LESS_IS_BETTER = frozenset(("p50_ms", "seconds", "per_minute", "bytes_per_job"))
LOG_SPAN = 20.0  # a panel whose bars span more than this factor is drawn on a log scale
COLOURS = {"xjobs": "#1f6feb", "peer": "#8b949e", "ceiling": "#d29922"}
COLUMNS = 2


@dataclass(frozen=True)
class Bar:
    name: str
    engine: str
    value: float
    kind: str  # xjobs, peer or ceiling


@dataclass(frozen=True)
class Panel:
    workload: str
    title: str
    unit: str
    bars: tuple[Bar, ...]
    log: bool


def kind_of(name: str) -> str:
    return (
        "xjobs" if name.startswith("xjobs") else "ceiling" if name.startswith("ceiling") else "peer"
    )


def panels(results: dict[str, Any]) -> list[Panel]:
    """One panel per pictured workload that xjobs and at least one other contender measured (or
    that the peers measured and xjobs has not yet): each contender's primary figure, grouped by
    engine (xjobs first, the ceiling last)."""
    out: list[Panel] = []
    for workload in PICTURED:
        key = PRIMARY[workload]
        bars = [
            Bar(name, engine_of(name), float(value), kind_of(name))
            for engine in ENGINES
            for name in sorted(results, key=lambda n: ("xpc".index(kind_of(n)[0]), n))
            if engine_of(name) == engine
            and isinstance(value := results[name].get(workload, {}).get(key), (int, float))
            and value > 0
        ]
        kinds = {bar.kind for bar in bars}
        pending = any(
            str(r.get(workload, {}).get("unsupported", "")).startswith(NOT_YET)
            for name, r in results.items()
            if kind_of(name) == "xjobs"
        )  # xjobs will run it (W11): the peers' bars, and the title says so
        if not bars or (("xjobs" not in kinds or len(kinds) < 2) and not pending):
            continue
        values = [bar.value for bar in bars]
        better = "lower" if key in LESS_IS_BETTER else "higher"
        out.append(
            Panel(
                workload,
                TITLES[workload] + (" (xjobs: not yet)" if "xjobs" not in kinds else ""),
                f"{UNITS[key]}, {better} is better",
                tuple(bars),
                max(values) / min(values) > LOG_SPAN,
            )
        )
    return out


def draw(drawn: list[Panel], out: Path, title: str) -> None:
    """The panels as one SVG (or PNG, by `out`'s suffix), through matplotlib."""
    matplotlib: Any = importlib.import_module("matplotlib")
    matplotlib.use("Agg")
    matplotlib.rcParams["svg.hashsalt"] = "xjobs-bench"  # the same run draws the same file
    plt: Any = importlib.import_module("matplotlib.pyplot")
    rows = (len(drawn) + COLUMNS - 1) // COLUMNS
    figure, axes = plt.subplots(rows, COLUMNS, figsize=(7 * COLUMNS, 3.6 * rows), squeeze=False)
    for ax, panel in zip(axes.flat, drawn, strict=False):
        labels = [f"{bar.name}\n({bar.engine})" for bar in panel.bars]
        colours = [COLOURS[bar.kind] for bar in panel.bars]
        ax.bar(range(len(labels)), [bar.value for bar in panel.bars], color=colours)
        ax.set_xticks(range(len(labels)), labels, rotation=60, ha="right", fontsize=7)
        ax.set_title(panel.title, fontsize=9)
        ax.set_ylabel(panel.unit, fontsize=8)
        if panel.log:
            ax.set_yscale("log")
    for ax in list(axes.flat)[len(drawn) :]:
        ax.set_visible(False)
    figure.suptitle(title, fontsize=11)
    figure.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(out, metadata={"Date": None} if out.suffix == ".svg" else None)
    plt.close(figure)


def write(data: dict[str, Any], out: Path) -> str:
    """Draw the run `data` (the results JSON) into `out`; a line saying what was done."""
    drawn = panels(data["results"])
    if not drawn:
        return (
            f"no picture: no workload has xjobs and another contender measured ({out} not written)"
        )
    try:
        draw(drawn, out, f"xjobs benchmark, {data.get('date', '')}")
    except ImportError:
        return f"no picture: matplotlib is not installed here ({out} not written)"
    return f"picture: {out} ({len(drawn)} workloads)"


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m bench.picture RESULTS.json OUT.svg", file=sys.stderr)
        return 2
    print(write(json.loads(Path(argv[0]).read_text()), Path(argv[1])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
