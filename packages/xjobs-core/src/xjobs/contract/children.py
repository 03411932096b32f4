"""`ChildStore`: child jobs spawned by a parent run's step, their group, the parent's park and wake.

A backend that declares the `children` capability implements it, and makes every terminal write
of its driver (ack, complete, a terminal nack, cancel, a burial by the claim) resolve the child's
group in the same transaction (statement, script, lock) as the child's own ending.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final, Protocol, runtime_checkable

from xjobs.contract.driver import Claim, JobState, Nack, NewJob

MAX_SPAWN_PAGE: Final = 500
"""At most this many children are written by one `spawn` call (core pages a larger step)."""
MAX_CHILDREN_PAGE: Final = 1000
"""At most this many children are read by one `children_page` call."""
MAX_GROUP_CHILDREN: Final = 100_000
"""At most this many children in one step (core refuses more before anything is written)."""


@dataclass(frozen=True, slots=True)
class ChildGroup:
    """The children of one step of one parent run, as the step declares them.

    The group is keyed by `(parent_run_id, step)`. `total` is fixed by the first spawn (every later
    page carries the same). `wait`: the parent parks until the group resolves (`invoke`, `map`);
    `fail_fast`: the group resolves at its first failed child (else when every child ended);
    `detached`: its children survive a cancel of the parent (only for `wait=False`).
    """

    parent_id: str
    parent_run_id: str
    parent_queue: str
    step: str
    total: int
    wait: bool
    fail_fast: bool
    detached: bool = False


@dataclass(frozen=True, slots=True)
class GroupState:
    """A group as stored: how many children were written, ended and failed, whether it resolved.

    `failed` counts children that ended in any state but `completed`; `first_failed` is the index
    of the first one to end so (in the order of the endings), `None` while none failed.
    `resolved` is set once, by the terminal write that resolved the group (or never, for a group
    that does not wait).
    """

    total: int
    spawned: int
    ended: int
    failed: int
    first_failed: int | None
    resolved: bool


@dataclass(frozen=True, slots=True)
class ChildRow:
    """One child as its parent reads it back: its place in the step, id, state, result, error."""

    index: int
    job_id: str
    state: JobState
    result: str | None
    last_error: str | None


@dataclass(frozen=True, slots=True)
class Family:
    """A job's place in a workflow, for an operator: its parent (if a child) and its children
    counted by state (empty for a job that spawned none)."""

    parent_id: str | None
    children: Mapping[str, int]


@runtime_checkable
class ChildStore(Protocol):
    """Children of parent runs. Every write here is fenced on the parent's claim (state running,
    worker, claims), as a step write is; a missed fence answers `False`/`None` and writes nothing."""

    async def spawn(
        self, claim: Claim, group: ChildGroup, first_index: int, rows: Sequence[NewJob]
    ) -> int | None:
        """Write one page of the group's children, `rows[i]` at index `first_index + i`, atomically
        with the parent's fence check; answers the group's `spawned` count after it, or `None` (the
        fence missed: nothing written).

        The group row is created by its first page (with `group.total`). A child whose id exists
        already (a replay) is skipped, never written twice, and never counted twice. `spawned`
        becomes `max(spawned, first_index + len(rows))`. Each child is linked to its parent
        (`parent_id`, the group key, its index, `detached`). A child is a plain job otherwise:
        claimed, retried and settled like any other.
        """
        ...

    async def group(self, parent_run_id: str, step: str) -> GroupState | None:
        """The group's stored state, or `None` when no page of it was written."""
        ...

    async def park(self, claim: Claim, parent_run_id: str, step: str, nack: Nack) -> bool:
        """Atomically mark the parent parked on the group and store the settle room's `nack`
        (`waiting`, uncounted) under the parent's fence. When the group is already resolved, the
        parent is due now instead (`nack.run_at_ms` replaced by the store's now): the children
        that ended before the park are not lost. Answers whether the park landed."""
        ...

    async def children_page(
        self, parent_run_id: str, step: str, after_index: int, limit: int
    ) -> list[ChildRow]:
        """Up to `limit` (at most `MAX_CHILDREN_PAGE`) children of the group with an index above
        `after_index`, in index order (a cursor: pass the last index read, -1 to start)."""
        ...

    async def cancel_children(self, claim: Claim, parent_run_id: str, step: str) -> int | None:
        """Cancel every live child of the group and their live non-detached descendants, under
        the parent's fence (a fail-fast parent stops the siblings of a failed child); answers how
        many jobs were cancelled, or `None` (the fence missed)."""
        ...

    async def family(self, job_id: str) -> Family | None:
        """The job's parent and its children counted by state, or `None` for an unknown job."""
        ...
