"""The `xjobs --version` line, read from the installed distributions' metadata."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

DISTRIBUTIONS = ("xjobs-cli", "xjobs-core")


def distribution_version(name: str) -> str:
    """The installed version of distribution `name`, or "unknown" when it is not installed."""
    try:
        return version(name)
    except PackageNotFoundError:
        return "unknown"


def version_line() -> str:
    """`xjobs <cli version> (xjobs-cli <v>, xjobs-core <v>)`."""
    cli, core = (distribution_version(name) for name in DISTRIBUTIONS)
    return f"xjobs {cli} (xjobs-cli {cli}, xjobs-core {core})"
