"""The pluggy hook specifications a driver distribution implements (entry-point group `xjobs`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pluggy

if TYPE_CHECKING:
    from xjobs.contract.factory import BackendFactory

hookspec = pluggy.HookspecMarker("xjobs")
hookimpl = pluggy.HookimplMarker("xjobs")
"""Marks a plugin's implementation of an `xjobs_*` hook (a driver's `plugin.py`)."""


@hookspec
def xjobs_backends() -> list[BackendFactory]:  # type: ignore[empty-body]
    """Called once when the plugins load; answers the backend factories this plugin provides.

    Each factory names the URL schemes it opens, the driver API version it was built for, how to
    open a `Backend` from a URL, and how the parity suite gets a fresh isolated backend for a test.
    """
