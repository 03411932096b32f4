"""The memory store's operator index: each queue's jobs per state in creation order, and its
ready jobs by `run_at`, so a page or a count walks what it answers, not every row."""

from __future__ import annotations

from bisect import bisect_left, bisect_right, insort
from collections.abc import Iterator

from xjobs.memory.rows import JobRow

Key = tuple[int, str]  # (created_at_ms or run_at_ms, id)


def _add(keys: list[Key], key: Key) -> None:
    """Insert in order; a new job's key is usually the largest, so that is an append."""
    if not keys or keys[-1] < key:
        keys.append(key)
    else:
        insort(keys, key)


def _discard(keys: list[Key], key: Key) -> None:
    at = bisect_left(keys, key)
    if at < len(keys) and keys[at] == key:
        del keys[at]


class ListingIndex:
    """Per (queue, state) the keys `(created_at_ms, id)` in order; per queue the ready jobs by
    `(run_at_ms, id)`, in two lists: those due when last written, and those that were not (so a
    million delayed jobs never sit in front of the due ones). Kept by the driver's one
    bookkeeping point, so it moves with every write."""

    def __init__(self) -> None:
        self._created: dict[tuple[str, str], list[Key]] = {}
        self._due: dict[str, list[Key]] = {}
        self._delayed: dict[str, list[Key]] = {}
        self._indexed: dict[str, tuple[str, str, int, bool]] = {}  # id -> where it is indexed

    def put(self, row: JobRow, now_ms: int) -> None:
        """Index `row` as it now is (after any write)."""
        now = (row.queue, row.state, row.run_at_ms, row.run_at_ms > now_ms)
        before = self._indexed.get(row.id)
        if before == now:
            return
        if before is not None:
            self._unindex(row, before)
        _add(self._created.setdefault((row.queue, row.state), []), (row.created_at_ms, row.id))
        if row.state == "ready":
            by_run_at = self._delayed if now[3] else self._due
            _add(by_run_at.setdefault(row.queue, []), (row.run_at_ms, row.id))
        self._indexed[row.id] = now

    def drop(self, row: JobRow) -> None:
        """Forget a removed row."""
        before = self._indexed.pop(row.id, None)
        if before is not None:
            self._unindex(row, before)

    def _unindex(self, row: JobRow, at: tuple[str, str, int, bool]) -> None:
        queue, state, run_at_ms, delayed = at
        _discard(self._created.get((queue, state), []), (row.created_at_ms, row.id))
        if state == "ready":
            by_run_at = self._delayed if delayed else self._due
            _discard(by_run_at.get(queue, []), (run_at_ms, row.id))

    def queues(self) -> set[str]:
        """Every queue that holds a job."""
        return {queue for (queue, _), keys in self._created.items() if keys}

    def count(self, queue: str, state: str) -> int:
        """How many jobs of `queue` are in `state` (exact, in constant time)."""
        return len(self._created.get((queue, state), ()))

    def scheduled(self, queue: str, now_ms: int) -> int:
        """How many ready jobs of `queue` are due after `now_ms` (`now_ms` never earlier than
        any write: a job due when written stays due)."""
        keys = self._delayed.get(queue, [])
        return len(keys) - bisect_right(keys, (now_ms, "\U0010ffff"))

    def oldest_due(self, queue: str, now_ms: int) -> int | None:
        """The earliest `run_at_ms` of a ready job of `queue` due at `now_ms`, if any."""
        heads = [keys[0][0] for keys in (self._due.get(queue), self._delayed.get(queue)) if keys]
        due = [run_at for run_at in heads if run_at <= now_ms]
        return min(due, default=None)

    def newest_first(self, queue: str, state: str, before: Key | None) -> Iterator[Key]:
        """The keys of `queue` in `state`, newest first, strictly older than `before`."""
        keys = self._created.get((queue, state), [])
        end = len(keys) if before is None else bisect_left(keys, before)
        return (keys[i] for i in range(end - 1, -1, -1))

    def oldest_first(self, queue: str, state: str) -> Iterator[Key]:
        """The keys of `queue` in `state`, oldest first (live: take what you need before moving
        any of them)."""
        return iter(self._created.get((queue, state), []))
