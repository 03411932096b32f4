"""Job and run ids: canonical UUIDv7 text, ordered by creation time."""

from __future__ import annotations

import time
import uuid

from xjobs.ids import new_id, new_id_pair, new_worker_id


def test_a_job_id_is_a_canonical_uuid7() -> None:
    for _ in range(1000):
        text = new_id()
        parsed = uuid.UUID(text)
        assert (str(parsed), parsed.version, parsed.variant) == (text, 7, uuid.RFC_4122)


def test_job_ids_sort_by_creation_time() -> None:
    earlier = new_id()
    time.sleep(0.002)
    assert earlier < new_id()


def test_ids_of_one_process_strictly_increase_within_a_millisecond() -> None:
    made = [new_id() for _ in range(5_000)]
    assert made == sorted(made)
    assert len(set(made)) == len(made)


def test_a_job_id_carries_the_epoch_milliseconds() -> None:
    before = time.time_ns() // 1_000_000
    stamped = uuid.UUID(new_id()).int >> 80
    assert before <= stamped <= time.time_ns() // 1_000_000


def test_a_pair_is_two_canonical_uuid7_in_order_among_single_ids() -> None:
    made: list[str] = []
    for _ in range(2_000):
        made.append(new_id())
        made.extend(new_id_pair())
    assert made == sorted(made)
    assert len(set(made)) == len(made)
    for text in made[:300]:
        parsed = uuid.UUID(text)
        assert (str(parsed), parsed.version, parsed.variant) == (text, 7, uuid.RFC_4122)


def test_the_two_ids_of_a_pair_differ_in_their_random_bits() -> None:
    first, second = (uuid.UUID(text).int & ((1 << 62) - 1) for text in new_id_pair())
    assert first != second


def test_a_worker_id_is_random() -> None:
    assert uuid.UUID(new_worker_id()).version == 4
