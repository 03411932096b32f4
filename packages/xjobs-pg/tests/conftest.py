"""Fixtures the Postgres package tests share: schemas of a test's own on the test server."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest_asyncio

from xjobs_pg.testing import scratch_schema


@pytest_asyncio.fixture
async def schema() -> AsyncIterator[str]:
    """A schema of this test's own (its wake channel too), dropped afterwards."""
    async with scratch_schema() as name:
        yield name


@pytest_asyncio.fixture
async def other_schema() -> AsyncIterator[str]:
    """A second schema of this test's own, dropped afterwards."""
    async with scratch_schema() as name:
        yield name
