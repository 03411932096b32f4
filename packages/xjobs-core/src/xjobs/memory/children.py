"""The memory child store: groups of children per parent run, resolved by each child's ending
(the driver's settle listener, inside the same atomic write) and the cancel cascade."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from xjobs.clock import Clock
from xjobs.contract.children import ChildGroup, ChildRow, Family, GroupState
from xjobs.contract.driver import LIVE_STATES, Claim, Nack, NewJob
from xjobs.memory.driver import MemoryJobDriver

GroupKey = tuple[str, str]  # (parent run id, step)


@dataclass(slots=True)
class _Group:
    """A group as stored: its declaration, its children by index, and the counts its endings move."""

    declared: ChildGroup
    members: dict[int, str] = field(default_factory=dict)
    spawned: int = 0
    ended: int = 0
    failed: int = 0
    first_failed: int | None = None
    resolved: bool = False
    parked: bool = False

    def state(self) -> GroupState:
        return GroupState(
            self.declared.total,
            self.spawned,
            self.ended,
            self.failed,
            self.first_failed,
            self.resolved,
        )


@dataclass(slots=True)
class _Link:
    """A child's place: its group, its index, whether it outlives a cancel of its parent, and
    whether its ending was counted (once, at the first)."""

    group: GroupKey
    index: int
    parent_id: str
    detached: bool
    counted: bool = False


class MemoryChildStore:
    """Children linked to their parents beside the driver's rows; every method is atomic."""

    def __init__(self, clock: Clock, jobs: MemoryJobDriver) -> None:
        self._clock = clock
        self._jobs = jobs
        self._groups: dict[GroupKey, _Group] = {}
        self._links: dict[str, _Link] = {}  # by child id
        self._kids: dict[str, list[str]] = {}  # parent id -> child ids, in spawn order
        self._runs: dict[str, list[GroupKey]] = {}  # parent run id -> its groups
        self._cancelled = 0  # jobs the cascade moved, for `cancel_children`'s answer
        jobs.on_settle(self._ended)
        jobs.on_remove(self._forget_run)

    def _forget_run(self, run_id: str) -> None:
        """A removed (or purged) parent's groups and their links go with it."""
        for key in self._runs.pop(run_id, ()):
            stored = self._groups.pop(key)
            for job_id in stored.members.values():
                self._links.pop(job_id, None)
            self._kids.pop(stored.declared.parent_id, None)

    # -- the driver's terminal writes -----------------------------------------------------------

    def _ended(self, job_id: str) -> None:
        """A job reached a finished state (called inside the driver's write): a cancel cascades to
        its live non-detached children, and a child's first ending resolves its group."""
        row = self._jobs.row(job_id)
        if row is None:
            return
        if row.state == "cancelled":
            self._cancelled += 1
            for kid in self._kids.get(job_id, ()):
                if not self._links[kid].detached:
                    self._jobs.cancel_now(kid, "parent cancelled")
        link = self._links.get(job_id)
        if link is None or link.counted:
            return
        link.counted = True
        group = self._groups[link.group]
        group.ended += 1
        if row.state != "completed":
            group.failed += 1
            if group.first_failed is None:
                group.first_failed = link.index
        declared = group.declared
        if not declared.wait or group.resolved:
            return
        if group.ended >= declared.total or (declared.fail_fast and group.failed):
            group.resolved = True  # the one wake of the parent
            if group.parked:
                self._jobs.wake_waiting(declared.parent_id, declared.parent_run_id)

    # -- the contract ---------------------------------------------------------------------------

    async def spawn(
        self, claim: Claim, group: ChildGroup, first_index: int, rows: Sequence[NewJob]
    ) -> int | None:
        if not self._jobs.holds(claim):
            return None
        key = (group.parent_run_id, group.step)
        stored = self._groups.get(key)
        if stored is None:
            stored = self._groups[key] = _Group(group)
            self._runs.setdefault(group.parent_run_id, []).append(key)
        fresh: list[NewJob] = []
        kids = self._kids.setdefault(group.parent_id, [])
        for offset, row in enumerate(rows):
            if row.id in self._links or self._jobs.row(row.id) is not None:
                continue  # a replayed page: written once
            index = first_index + offset
            self._links[row.id] = _Link(key, index, group.parent_id, group.detached)
            stored.members[index] = row.id
            kids.append(row.id)
            fresh.append(row)
        self._jobs.insert(fresh)
        stored.spawned = max(stored.spawned, first_index + len(rows))
        return stored.spawned

    async def group(self, parent_run_id: str, step: str) -> GroupState | None:
        stored = self._groups.get((parent_run_id, step))
        return None if stored is None else stored.state()

    async def park(self, claim: Claim, parent_run_id: str, step: str, nack: Nack) -> bool:
        if not self._jobs.holds(claim):
            return False
        stored = self._groups.get((parent_run_id, step))
        if stored is not None:
            stored.parked = True
            if stored.resolved:  # the children ended before the park: due now
                nack = replace(nack, run_at_ms=self._clock.now_ms())
        return await self._jobs.nack(claim, nack)

    async def children_page(
        self, parent_run_id: str, step: str, after_index: int, limit: int
    ) -> list[ChildRow]:
        stored = self._groups.get((parent_run_id, step))
        if stored is None:
            return []
        page: list[ChildRow] = []
        for index in range(max(after_index + 1, 0), stored.spawned):
            if len(page) >= limit:
                break
            job_id = stored.members.get(index)
            row = None if job_id is None else self._jobs.row(job_id)
            if row is not None:
                page.append(ChildRow(index, row.id, row.state, row.result, row.last_error))
        return page

    async def cancel_children(self, claim: Claim, parent_run_id: str, step: str) -> int | None:
        if not self._jobs.holds(claim):
            return None
        stored = self._groups.get((parent_run_id, step))
        before = self._cancelled
        for job_id in [] if stored is None else list(stored.members.values()):
            row = self._jobs.row(job_id)
            if row is not None and row.state in LIVE_STATES:
                self._jobs.cancel_now(job_id, "sibling failed")
        return self._cancelled - before

    async def family(self, job_id: str) -> Family | None:
        if self._jobs.row(job_id) is None:
            return None
        link = self._links.get(job_id)
        states: Counter[str] = Counter()
        for kid in self._kids.get(job_id, ()):
            row = self._jobs.row(kid)
            if row is not None:
                states[row.state] += 1
        return Family(None if link is None else link.parent_id, dict(sorted(states.items())))

    # -- retention ------------------------------------------------------------------------------

    def held(self, job_id: str) -> bool:
        """Whether a finished job is a child its live parent may still read (retention keeps it)."""
        link = self._links.get(job_id)
        if link is None:
            return False
        parent = self._jobs.row(link.parent_id)
        return parent is not None and parent.state in LIVE_STATES
