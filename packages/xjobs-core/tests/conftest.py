"""Fixtures shared by xjobs-core's unit tests (no servers: everything here runs in-process)."""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pytest

from xjobs.contract.plugins import reset_registry

FAKE_PLUGIN_PREFIX = "fake_xjobs_plugin"


@pytest.fixture
def fresh_plugins() -> Iterator[None]:
    """The plugin registry read again for this test, and forgotten after it.

    Teardown forgets it again (and any throwaway plugin module a test imported), so the next
    test loads the real entry points, with whatever environment it runs in.
    """
    reset_registry()
    yield
    reset_registry()
    for name in [m for m in sys.modules if m.startswith(FAKE_PLUGIN_PREFIX)]:
        del sys.modules[name]
