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
        chunks, maxes = self._chunks, self._maxes
        if not chunks:
            chunks.append([key])
            maxes.append(key)
            return
        if key > maxes[-1]:  # the usual case, first: no search
            at = len(chunks) - 1
            chunk = chunks[at]
            chunk.append(key)
            maxes[at] = key
        else:
            at = bisect_left(maxes, key)
            chunk = chunks[at]
            insort(chunk, key)
        if len(chunk) > 2 * CHUNK:
            chunks[at : at + 1] = [chunk[:CHUNK], chunk[CHUNK:]]
            maxes[at : at + 1] = [chunk[CHUNK - 1], chunk[-1]]

    def discard(self, key: Key) -> None:
        """Remove `key` if it is kept."""
        chunks = self._chunks
        if chunks and chunks[0][0] == key:  # the oldest, as a claim takes it: no search
            first = chunks[0]
            del first[0]
            self._len -= 1
            if not first:
                del chunks[0]
                del self._maxes[0]
            return
        at = bisect_left(self._maxes, key)
        if at == len(chunks):
            return
        chunk = chunks[at]
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
        """How many keys are greater than `key`, summing the chunks on the shorter side of it (a
        count of jobs due after now finds them near the front: a few chunks, not all)."""
        chunks = self._chunks
        at = bisect_right(self._maxes, key)
        if at == len(chunks):
            return 0
        after = len(chunks[at]) - bisect_right(chunks[at], key)
        if at < len(chunks) // 2:
            before = sum(len(chunks[n]) for n in range(at)) + len(chunks[at]) - after
            return self._len - before
        return after + sum(len(chunks[n]) for n in range(at + 1, len(chunks)))

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

# Where a row is indexed: (state, run_at_ms, delayed, queue, its created keys, its run_at keys).
_Where = tuple[str, int, bool, str, Keys, Keys | None]


def _unindex(row: JobRow, at: _Where) -> None:
    at[4].discard((row.created_at_ms, row.id))
    by_run_at = at[5]
    if by_run_at is not None:
        by_run_at.discard((at[1], row.id))


class ListingIndex:
    """Per (queue, state) the keys `(created_at_ms, id)` in order; per queue the ready jobs by
    `(run_at_ms, id)`, in two lists: those due when last written, and those that were not (so a
    million delayed jobs never sit in front of the due ones). Fed by the driver's one
    bookkeeping point with every write, and brought up to date when it is next read: a job that
    is enqueued, claimed and completed between two reads is indexed once, as it ends up."""

    def __init__(self) -> None:
        self._created: dict[tuple[str, str], Keys] = {}
        self._due: dict[str, Keys] = {}
        self._delayed: dict[str, Keys] = {}
        # id -> where it is indexed: what it was indexed as, and the keys holding it (a `Keys` is
        # never dropped from its dict, so the reference stays good): a move looks nothing up twice
        self._indexed: dict[str, _Where] = {}
        # rows written since the last read, each with the time of its last write
        self._pending: dict[str, tuple[JobRow, int]] = {}

    def put(self, row: JobRow, now_ms: int) -> None:
        """Note that `row` was written at `now_ms`; it is indexed as it then is at the next read."""
        self._pending[row.id] = (row, now_ms)

    def _caught_up(self) -> ListingIndex:
        """Index every row written since the last read (each read starts here)."""
        if self._pending:
            pending, self._pending = self._pending, {}
            for row, now_ms in pending.values():
                self._index(row, now_ms)
        return self

    def _index(self, row: JobRow, now_ms: int) -> None:
        """Index `row` as it now is, written at `now_ms` (due or delayed as of then)."""
        queue, state, run_at, job_id = row.queue, row.state, row.run_at_ms, row.id
        delayed = run_at > now_ms
        before = self._indexed.get(job_id)
        if before is not None:
            if (
                before[0] == state
                and before[1] == run_at
                and before[2] == delayed
                and before[3] == queue
            ):
                return
            _unindex(row, before)
        where = (queue, state)
        created = self._created.get(where)
        if created is None:
            created = self._created[where] = Keys()
        created.add((row.created_at_ms, job_id))
        by_run_at: Keys | None = None
        if state == "ready":
            kept = self._delayed if delayed else self._due
            by_run_at = kept.get(queue)
            if by_run_at is None:
                by_run_at = kept[queue] = Keys()
            by_run_at.add((run_at, job_id))
        self._indexed[job_id] = (state, run_at, delayed, queue, created, by_run_at)

    def drop(self, row: JobRow) -> None:
        """Forget a removed row."""
        self._pending.pop(row.id, None)
        before = self._indexed.pop(row.id, None)
        if before is not None:
            _unindex(row, before)

    def queues(self) -> set[str]:
        """Every queue that holds a job."""
        return {queue for (queue, _), keys in self._caught_up()._created.items() if keys}

    def count(self, queue: str, state: str) -> int:
        """How many jobs of `queue` are in `state` (exact, in constant time)."""
        return len(self._caught_up()._created.get((queue, state), _EMPTY))

    def scheduled(self, queue: str, now_ms: int) -> int:
        """How many ready jobs of `queue` are due after `now_ms` (`now_ms` never earlier than
        any write: a job due when written stays due)."""
        return self._caught_up()._delayed.get(queue, _EMPTY).count_after((now_ms, "\U0010ffff"))

    def oldest_due(self, queue: str, now_ms: int) -> int | None:
        """The earliest `run_at_ms` of a ready job of `queue` due at `now_ms`, if any."""
        self._caught_up()
        heads = [
            keys.first()[0] for keys in (self._due.get(queue), self._delayed.get(queue)) if keys
        ]
        due = [run_at for run_at in heads if run_at <= now_ms]
        return min(due, default=None)

    def newest_first(self, queue: str, state: str, before: Key | None) -> Iterator[Key]:
        """The keys of `queue` in `state`, newest first, strictly older than `before`."""
        return self._caught_up()._created.get((queue, state), _EMPTY).descending_before(before)

    def oldest_first(self, queue: str, state: str) -> Iterator[Key]:
        """The keys of `queue` in `state`, oldest first (live: take what you need before moving
        any of them)."""
        return self._caught_up()._created.get((queue, state), _EMPTY).ascending()
