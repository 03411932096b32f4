"""Parity: the event match compares numbers by exact value — a 64-bit id matches only itself, never
an id a few doubles away (issue 40, item 7; stores.py, "EventWait")."""

from __future__ import annotations

import json

import pytest

from xjobs.contract.stores import EventBus
from xjobs.run.settle import parking
from xjobs.testing import rows
from xjobs.testing.parity.env import ParityEnv

pytestmark = [pytest.mark.xjobs_parity, pytest.mark.requires("events")]

EVENT = "order.paid"
HOUR_MS = 3_600_000
BIG = 2**63 - 1000  # a 64-bit id: BIG + 128 is the same double


def _bus(parity: ParityEnv) -> EventBus:
    events = parity.backend.events
    assert events is not None
    return events


class TestExactNumbers:
    async def test_a_64_bit_id_is_not_woken_by_an_id_128_away(self, parity: ParityEnv) -> None:
        """Rule: integers beyond 2^53 compare exactly: a wait on id 2^63-1000 stays parked when id
        2^63-1000+128 (the same double) is sent, and the exact id wakes it."""
        await parity.enqueue()
        claimed = await parity.claim_one()
        run_at = parity.clock.now_ms() + HOUR_MS
        wait = rows.event_wait(claimed, event=EVENT, match=json.dumps({"id": BIG}))
        assert await _bus(parity).park(claimed.claim, wait, parking(run_at))
        await _bus(parity).send(EVENT, json.dumps({"id": BIG + 128}))
        near = (await parity.record(claimed.id)).run_at_ms
        now = parity.clock.advance(5)
        await _bus(parity).send(EVENT, json.dumps({"id": BIG}))
        assert (near, (await parity.record(claimed.id)).run_at_ms) == (run_at, now)

    @pytest.mark.parametrize(
        ("payload", "match", "found"),
        [
            ({"id": BIG + 128}, {"id": BIG}, False),
            ({"id": BIG}, {"id": BIG}, True),
            ({"id": -BIG - 128}, {"id": -BIG}, False),
            ({"id": 2**53 + 1}, {"id": 2**53}, False),
            ({"id": [2**64 + 1]}, {"id": [2**64]}, False),
            ({"id": {"n": 2**64}}, {"id": {"n": 2**64}}, True),
            ({"n": 10**30}, {"n": 1e30}, True),
            ({"n": 0.5}, {"n": 0.50}, True),
            ({"n": 0}, {"n": -0.0}, True),
            ({"n": 12.5}, {"n": 12.25}, False),
        ],
    )
    async def test_find_compares_numbers_by_exact_value(
        self, parity: ParityEnv, payload: object, match: object, found: bool
    ) -> None:
        """Rule: numbers match by exact decimal value (an integer is never rounded to a double):
        `1e30` is `10**30`, `-0.0` is `0`, `2**53 + 1` is not `2**53`."""
        sent = await _bus(parity).send(EVENT, json.dumps(payload))
        answer = await _bus(parity).find(EVENT, json.dumps(match), 0)
        assert (answer is not None and answer.id == sent.id) is found
