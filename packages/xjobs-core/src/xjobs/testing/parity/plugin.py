"""The parity suite's pytest plugin: `--xjobs-backend=NAME`, the `parity` fixture, and its async runner.

It needs nothing but pytest: each scenario is an `async def` run in its own event loop with a fresh
backend opened inside that loop, so the plugin is safe to load in any project's test run.
"""

from __future__ import annotations

import asyncio
import inspect
import os
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from xjobs.contract.plugins import factory_for_name
from xjobs.testing.parity.env import ParityEnv

MARKER = "xjobs_parity"
OPTION = "--xjobs-backend"
# A scenario that hangs fails with a timeout instead of holding the whole run.
SCENARIO_TIMEOUT_S = 120


def pytest_addoption(parser: pytest.Parser) -> None:
    """Add `--xjobs-backend`: the installed backend the parity scenarios run against."""
    parser.addoption(
        OPTION,
        action="store",
        default=os.environ.get("XJOBS_PARITY_BACKEND", "memory"),
        help="the installed xjobs backend the parity scenarios run against (default: memory)",
    )


def pytest_configure(config: pytest.Config) -> None:
    """Declare the parity marker and the `requires(capability)` marker."""
    config.addinivalue_line("markers", f"{MARKER}: an xjobs driver parity scenario")
    config.addinivalue_line(
        "markers", "requires(capability): skip the scenario on a backend that does not declare it"
    )


@pytest.fixture
def parity(request: pytest.FixtureRequest) -> ParityEnv:
    """A scenario's world; its backend opens (fresh and isolated) when the scenario runs."""
    name = request.config.getoption(OPTION)
    return ParityEnv(factory=factory_for_name(str(name)))


async def _run_scenario(
    item: pytest.Function, func: Callable[..., Awaitable[Any]], kwargs: dict[str, Any]
) -> None:
    env = next((v for v in kwargs.values() if isinstance(v, ParityEnv)), None)
    if env is None:
        await func(**kwargs)
        return
    async with env.factory.open_test_backend(env.clock) as backend:
        for marker in item.iter_markers("requires"):
            for capability in marker.args:
                if capability not in backend.capabilities:
                    pytest.skip(
                        f"the {backend.name} backend does not declare the {capability!r} capability"
                    )
        env._backend = backend
        try:
            await func(**kwargs)
        finally:
            env._backend = None


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    """Run a marked async scenario in its own event loop, bounded by the scenario timeout."""
    if pyfuncitem.get_closest_marker(MARKER) is None:
        return None
    func = pyfuncitem.obj
    if not inspect.iscoroutinefunction(func):
        return None
    kwargs = {name: pyfuncitem.funcargs[name] for name in pyfuncitem._fixtureinfo.argnames}
    asyncio.run(_bounded(_run_scenario(pyfuncitem, func, kwargs)))
    return True


async def _bounded(scenario: Awaitable[None]) -> None:
    async with asyncio.timeout(SCENARIO_TIMEOUT_S):
        await scenario
