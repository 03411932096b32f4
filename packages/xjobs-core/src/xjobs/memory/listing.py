"""The memory store's operator index: each queue's jobs per state in creation order, and its
ready jobs by `run_at`, so a page or a count walks what it answers, not every row."""

from __future__ import annotations

from bisect import bisect_left, bisect_right, insort
from collections.abc import Iterator

from xjobs.memory.rows import JobRow

Key = tuple[int, str]  # (created_at_ms or run_at_ms, id)
CHUNK = 512  # keys per chunk of a `Keys`: a write moves at most this many, however many are kept


class Keys:
    """Keys in order, kept in chunks of at most 2 × CHUNK: adding or removing one (a claim takes
    the oldest ready job) moves the keys of one chunk, never all of them."""

    __slots__ = ("_chunks", "_len", "_maxes")

    def __init__(self) -> None:
        self._chunks: list[list[Key]] = []
        self._maxes: list[Key] = []  # the last key of each chunk
        self._len = 0

    def __len__(self) -> int:
        return self._len

    def __bool__(self) -> bool:
        return self._len > 0

    def add(self, key: Key) -> None:
        """Insert in order; a new job's key is usually the largest, so that is an append."""
        self._len += 1
        if not self._chunks:
            self._chunks.append([key])
            self._maxes.append(key)
            return
        at = bisect_left(self._maxes, key)
        if at == len(self._chunks):
            at -= 1
            self._chunks[at].append(key)
            self._maxes[at] = key
        else:
            insort(self._chunks[at], key)
        chunk = self._chunks[at]
        if len(chunk) > 2 * CHUNK:
            self._chunks[at : at + 1] = [chunk[:CHUNK], chunk[CHUNK:]]
            self._maxes[at : at + 1] = [chunk[CHUNK - 1], chunk[-1]]

    def discard(self, key: Key) -> None:
        """Remove `key` if it is kept."""
        at = bisect_left(self._maxes, key)
        if at == len(self._chunks):
            return
        chunk = self._chunks[at]
        pos = bisect_left(chunk, key)
        if pos == len(chunk) or chunk[pos] != key:
            return
        del chunk[pos]
        self._len -= 1
        if not chunk:
            del self._chunks[at]
            del self._maxes[at]
        elif pos == len(chunk):
            self._maxes[at] = chunk[-1]

    def first(self) -> Key:
        """The smallest key (the caller knows there is one)."""
        return self._chunks[0][0]

    def count_after(self, key: Key) -> int:
        """How many keys are greater than `key`."""
        at = bisect_right(self._maxes, key)
        if at == len(self._chunks):
            return 0
        after = len(self._chunks[at]) - bisect_right(self._chunks[at], key)
        return after + sum(len(chunk) for chunk in self._chunks[at + 1 :])

    def ascending(self) -> Iterator[Key]:
        """Every key, smallest first."""
        for chunk in self._chunks:
            yield from chunk

    def descending_before(self, before: Key | None) -> Iterator[Key]:
        """The keys smaller than `before` (every key when `None`), greatest first."""
        at = len(self._chunks) - 1 if before is None else bisect_left(self._maxes, before)
        for n in range(min(at, len(self._chunks) - 1), -1, -1):
            chunk = self._chunks[n]
            end = len(chunk) if before is None else bisect_left(chunk, before)
            for i in range(end - 1, -1, -1):
                yield chunk[i]


_EMPTY = Keys()


class ListingIndex:
    """Per (queue, state) the keys `(created_at_ms, id)` in order; per queue the ready jobs by
    `(run_at_ms, id)`, in two lists: those due when last written, and those that were not (so a
    million delayed jobs never sit in front of the due ones). Kept by the driver's one
    bookkeeping point, so it moves with every write."""

    def __init__(self) -> None:
        self._created: dict[tuple[str, str], Keys] = {}
        self._due: dict[str, Keys] = {}
        self._delayed: dict[str, Keys] = {}
        self._indexed: dict[str, tuple[str, str, int, bool]] = {}  # id -> where it is indexed

    def put(self, row: JobRow, now_ms: int) -> None:
        """Index `row` as it now is (after any write)."""
        now = (row.queue, row.state, row.run_at_ms, row.run_at_ms > now_ms)
        before = self._indexed.get(row.id)
        if before == now:
            return
        if before is not None:
            self._unindex(row, before)
        created = self._created.get((row.queue, row.state))
        if created is None:
            created = self._created[(row.queue, row.state)] = Keys()
        created.add((row.created_at_ms, row.id))
        if row.state == "ready":
            by_run_at = self._delayed if now[3] else self._due
            keys = by_run_at.get(row.queue)
            if keys is None:
                keys = by_run_at[row.queue] = Keys()
            keys.add((row.run_at_ms, row.id))
        self._indexed[row.id] = now

    def drop(self, row: JobRow) -> None:
        """Forget a removed row."""
        before = self._indexed.pop(row.id, None)
        if before is not None:
            self._unindex(row, before)

    def _unindex(self, row: JobRow, at: tuple[str, str, int, bool]) -> None:
        queue, state, run_at_ms, delayed = at
        self._created.get((queue, state), _EMPTY).discard((row.created_at_ms, row.id))
        if state == "ready":
            by_run_at = self._delayed if delayed else self._due
            by_run_at.get(queue, _EMPTY).discard((run_at_ms, row.id))

    def queues(self) -> set[str]:
        """Every queue that holds a job."""
        return {queue for (queue, _), keys in self._created.items() if keys}

    def count(self, queue: str, state: str) -> int:
        """How many jobs of `queue` are in `state` (exact, in constant time)."""
        return len(self._created.get((queue, state), _EMPTY))

    def scheduled(self, queue: str, now_ms: int) -> int:
        """How many ready jobs of `queue` are due after `now_ms` (`now_ms` never earlier than
        any write: a job due when written stays due)."""
        return self._delayed.get(queue, _EMPTY).count_after((now_ms, "\U0010ffff"))

    def oldest_due(self, queue: str, now_ms: int) -> int | None:
        """The earliest `run_at_ms` of a ready job of `queue` due at `now_ms`, if any."""
        heads = [
            keys.first()[0] for keys in (self._due.get(queue), self._delayed.get(queue)) if keys
        ]
        due = [run_at for run_at in heads if run_at <= now_ms]
        return min(due, default=None)

    def newest_first(self, queue: str, state: str, before: Key | None) -> Iterator[Key]:
        """The keys of `queue` in `state`, newest first, strictly older than `before`."""
        return self._created.get((queue, state), _EMPTY).descending_before(before)

    def oldest_first(self, queue: str, state: str) -> Iterator[Key]:
        """The keys of `queue` in `state`, oldest first (live: take what you need before moving
        any of them)."""
        return self._created.get((queue, state), _EMPTY).ascending()
