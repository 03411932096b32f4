"""What the child-job scenarios share: the skip of a backend without child jobs, the inputs, and a
child job that squares its number (or fails on the numbers it is told to)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from pydantic import BaseModel

from xjobs.testing.parity.env import ParityEnv

CHILD_QUEUE = "parity-kids"


def needs_children(parity: ParityEnv) -> None:
    """Skip the scenario on a backend that does not declare child jobs (every shipped driver
    does; a third party's may not yet)."""
    backend = parity.backend
    if "children" not in backend.capabilities:
        pytest.skip(f"the {backend.name} backend does not declare the 'children' capability")


class Num(BaseModel):
    """A child's input: its org (the tenant), its number, and whether it should fail."""

    org: str = "org-1"
    n: int = 0
    fail: bool = False


class Batch(BaseModel):
    """A parent's input: its org and how many children it spawns."""

    org: str = "org-1"
    key: str = "p-1"
    count: int = 3


def org_of(value: Num | Batch) -> str:
    """The org a scenario input acts for."""
    return value.org


def num_key(value: Num) -> str:
    """A child's idempotency key (children are keyed by their place, never by it)."""
    return f"n-{value.n}"


def batch_key(value: Batch) -> str:
    """A parent's idempotency key."""
    return value.key


def nums(
    count: int, *, org: str = "org-1", failing: Callable[[int], bool] = lambda n: False
) -> list[Num]:
    """`count` child inputs numbered from 0, those `failing` says marked to fail."""
    return [Num(org=org, n=n, fail=failing(n)) for n in range(count)]
