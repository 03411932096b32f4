"""The generated reference: the API pages, every CLI command, error code and metric, from the code.

A MkDocs hook (`hooks:` in mkdocs.yml) adds the pages at build time, so they cannot drift from the
code; tests/docs/test_reference.py imports the same functions and fails when one misses a name.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import os
from collections.abc import Iterator
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from xjobs import XJobsError

# Each library distribution and its public module (xjobs-cli's public surface is the command).
DISTRIBUTIONS: tuple[tuple[str, str], ...] = (
    ("xjobs-core", "xjobs"),
    ("xjobs-web", "xjobs_web"),
    ("xjobs-pg", "xjobs_pg"),
    ("xjobs-redis", "xjobs_redis"),
    ("xjobs-sqlite", "xjobs_sqlite"),
    ("xjobs-django", "xjobs_django"),
)
# The modules that declare a distribution's refusals (style: one errors.py per package).
ERROR_MODULES = (
    "xjobs.errors",
    "xjobs_cli.errors",
    "xjobs_pg.errors",
    "xjobs_redis.errors",
    "xjobs_sqlite.errors",
    "xjobs_web.errors",
)
# argparse wraps help to $COLUMNS; the pages are the same on every machine
HELP_COLUMNS = "100"


# ---------------------------------------------------------------------------------------------
# The public API


def public_names(module: ModuleType) -> list[str]:
    """A distribution's public names: its `__all__`, less `__version__` (shown on the page)."""
    return [name for name in getattr(module, "__all__", ()) if name != "__version__"]


def _area(value: object, fallback: str) -> str:
    """The module that defines `value` (its area of the API), or `fallback` for plain data."""
    defined = getattr(value, "__module__", None)
    return defined if isinstance(defined, str) and not inspect.ismodule(value) else fallback


def api_page(distribution: str, module_name: str) -> str:
    """The API page of one distribution: its module's docstring, then each public name by area."""
    module = importlib.import_module(module_name)
    lines = [f"# {module_name}", "", f"`pip install {distribution}`", ""]
    lines += [f"::: {module_name}", "    options:", "      members: false", ""]
    by_area: dict[str, list[str]] = {}
    for name in public_names(module):
        value = getattr(module, name)
        by_area.setdefault(_area(value, module_name), []).append(name)
    for area, names in by_area.items():
        summary = (inspect.getdoc(importlib.import_module(area)) or area).splitlines()[0]
        lines += [f"## `{area}`", "", summary, ""]
        lines += [f"::: {module_name}.{name}" for name in names]
        lines.append("")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# The command line


def cli_commands() -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """Every command of `xjobs`, the verbs' verbs included, as (its words, its parser)."""
    from xjobs_cli.main import build_parser

    def walk(words: str, parser: argparse.ArgumentParser) -> Iterator[tuple[str, Any]]:
        yield words, parser
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for verb, sub in action.choices.items():
                    yield from walk(f"{words} {verb}", sub)

    yield from walk("xjobs", build_parser())


def cli_page() -> str:
    """One section per command, its `--help` as argparse prints it."""
    os.environ["COLUMNS"] = HELP_COLUMNS
    lines = [
        "# Command line",
        "",
        "Every `xjobs` command and its `--help`, generated from the parsers at build time.",
        "A refusal exits 2, an unreachable or failing backend 1; with `--json` a refusal is one",
        "JSON error object on stderr (its `code` is listed under [error codes](errors.md)).",
        "",
    ]
    for words, parser in cli_commands():
        lines += [f"## `{words}`", "", "```text", parser.format_help().rstrip(), "```", ""]
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# Error codes


@dataclass(frozen=True, slots=True)
class ErrorEntry:
    """One refusal class: its code, where it is declared, and its docstring."""

    code: str
    name: str
    module: str
    doc: str


def _subclasses(base: type[XJobsError]) -> Iterator[type[XJobsError]]:
    for sub in base.__subclasses__():
        yield sub
        yield from _subclasses(sub)


def error_entries() -> list[ErrorEntry]:
    """Every `XJobsError` subclass the distributions declare, sorted by code, then name."""
    for module_name in ERROR_MODULES:
        importlib.import_module(module_name)
    classes: list[type[XJobsError]] = [XJobsError, *_subclasses(XJobsError)]
    found = {
        cls: ErrorEntry(
            code=cls.code,
            name=cls.__qualname__,
            module=cls.__module__,
            doc=inspect.cleandoc(cls.__dict__.get("__doc__") or ""),
        )
        for cls in classes
    }
    return sorted(found.values(), key=lambda e: (e.code, e.name))


def errors_page() -> str:
    """One section per code: the classes that raise it and what each means."""
    lines = [
        "# Error codes",
        "",
        "Every refusal is an `XJobsError` subclass with a stable `.code`: match on the code, not",
        "the message. `str(error)` is `CODE: message`; the message says what was wrong. Each entry",
        "below says what the code means and what to do, generated from the classes' docstrings.",
        "",
    ]
    by_code: dict[str, list[ErrorEntry]] = {}
    for entry in error_entries():
        by_code.setdefault(entry.code, []).append(entry)
    for code, entries in by_code.items():
        lines += [f"## `{code}`", ""]
        for entry in entries:
            lines += [f"`{entry.module}.{entry.name}`", "", entry.doc, ""]
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# Metrics


@dataclass(frozen=True, slots=True)
class MetricEntry:
    """One exposed metric: its name, kind, labels and help."""

    name: str
    kind: str
    labels: tuple[str, ...]
    doc: str


def metric_entries() -> list[MetricEntry]:
    """Every metric a `Metrics` registry exposes, read from the registry's own collectors."""
    from xjobs.observe.metrics import Metrics

    registry = Metrics().registry
    found: list[MetricEntry] = []
    for collector in list(registry._collector_to_names):
        for family in collector.collect():
            labels = getattr(family, "_labelnames", None) or getattr(collector, "_labelnames", None)
            suffix = "_total" if family.type == "counter" else ""
            entry = MetricEntry(
                family.name + suffix, family.type, tuple(labels or ()), family.documentation
            )
            found.append(entry)
    return sorted(found, key=lambda m: m.name)


def metrics_page() -> str:
    """A table of every metric, then where the backend-wide gauges come from."""
    lines = [
        "# Metrics",
        "",
        "The Prometheus metrics of a process (`pip install 'xjobs-core[prometheus]'`; see",
        "[observability](../observability.md) for turning them on and the Grafana dashboard).",
        "Labels stay low in cardinality: never a job id or a tenant. Generated from the registry.",
        "",
        "| Metric | Kind | Labels | Meaning |",
        "|---|---|---|---|",
    ]
    for metric in metric_entries():
        labels = ", ".join(f"`{label}`" for label in metric.labels) or "—"
        lines.append(f"| `{metric.name}` | {metric.kind} | {labels} | {metric.doc} |")
    return "\n".join([*lines, ""])


# ---------------------------------------------------------------------------------------------
# The hook


def pages() -> dict[str, str]:
    """Every generated page by its path under docs/."""
    found = {f"reference/api/{module}.md": api_page(dist, module) for dist, module in DISTRIBUTIONS}
    found["reference/cli.md"] = cli_page()
    found["reference/errors.md"] = errors_page()
    found["reference/metrics.md"] = metrics_page()
    return found


def on_files(files: Any, config: Any) -> Any:
    """MkDocs: add the generated pages to the site's files before the nav is built."""
    from mkdocs.structure.files import File  # type: ignore[import-not-found,unused-ignore]

    for path, content in pages().items():
        files.append(File.generated(config, path, content=content))
    return files
