"""The memory store's listing index: written rows are indexed at the next read, as they end up."""

from __future__ import annotations

from xjobs.memory.listing import CHUNK, Keys, ListingIndex
from xjobs.memory.rows import JobRow
from xjobs.testing.rows import new_job

NOW = 1_000_000


def _row(run_at_ms: int | None = None) -> JobRow:
    return JobRow.from_new(new_job(run_at_ms=run_at_ms), NOW)


def test_a_row_written_many_times_between_reads_is_indexed_once_as_it_ends() -> None:
    index = ListingIndex()
    row = _row()
    index.put(row, NOW)
    row.state = "running"
    index.put(row, NOW + 1)
    row.state = "completed"
    index.put(row, NOW + 2)
    assert [index.count("default", s) for s in ("ready", "running", "completed")] == [0, 0, 1]
    assert list(index.oldest_first("default", "completed")) == [(row.created_at_ms, row.id)]


def test_a_row_moved_after_a_read_leaves_its_old_place() -> None:
    index = ListingIndex()
    row = _row()
    index.put(row, NOW)
    assert (index.count("default", "ready"), index.oldest_due("default", NOW)) == (1, NOW)
    row.state = "running"
    index.put(row, NOW + 1)
    assert (index.count("default", "ready"), index.count("default", "running")) == (0, 1)
    assert index.oldest_due("default", NOW + 1) is None


def test_due_or_delayed_is_judged_at_the_write_not_at_the_read() -> None:
    index = ListingIndex()
    later = _row(run_at_ms=NOW + 500)
    index.put(later, NOW)
    # read after its time came: it was delayed when written, so it is still counted as scheduled
    assert index.scheduled("default", NOW + 100) == 1
    assert index.queues() == {"default"}


def test_a_dropped_row_is_forgotten_whether_or_not_it_was_indexed_yet() -> None:
    index = ListingIndex()
    kept, pending, indexed = _row(), _row(), _row()
    index.put(indexed, NOW)
    assert index.count("default", "ready") == 1
    index.put(kept, NOW)
    index.put(pending, NOW)
    index.drop(pending)
    index.drop(indexed)
    assert list(index.newest_first("default", "ready", None)) == [(kept.created_at_ms, kept.id)]


def test_keys_stay_in_order_through_appends_inserts_and_removals_of_the_oldest() -> None:
    keys = Keys()
    added = [(n, f"id-{n:05}") for n in range(0, 3 * CHUNK, 2)]
    for key in added:
        keys.add(key)  # each the largest: appended
    odd = [(n, f"id-{n:05}") for n in range(1, 3 * CHUNK, 2)]
    for key in odd:
        keys.add(key)  # inside: inserted in order
    for key in sorted(added + odd)[:CHUNK]:
        keys.discard(key)  # the oldest each time, as a claim takes them
    keys.discard((10**9, "absent"))
    assert list(keys.ascending()) == sorted(added + odd)[CHUNK:]
    assert len(keys) == 2 * CHUNK


def test_count_after_answers_from_either_side_of_the_key() -> None:
    keys = Keys()
    kept = [(n, f"id-{n:06}") for n in range(0, 12 * CHUNK, 3)]
    for key in kept:
        keys.add(key)
    for key in kept[: CHUNK // 2]:
        keys.discard(key)  # a first chunk shorter than the rest
    kept = kept[CHUNK // 2 :]
    probes = [(-1, ""), kept[0], kept[len(kept) // 3], kept[len(kept) // 2], kept[-2], kept[-1]]
    probes += [(kept[len(kept) // 4][0] + 1, ""), (10**9, "")]
    for probe in probes:
        assert keys.count_after(probe) == sum(1 for key in kept if key > probe), probe
