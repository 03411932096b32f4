"""Parity: the fleet rate store — GCRA buckets taken all-or-nothing, waits, and abandon (semantics.md, "The worker")."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from xjobs.contract.rates import RateBucket, RateStore, RateVerdict

if TYPE_CHECKING:
    from xjobs.testing.parity.env import ParityEnv

pytestmark = [pytest.mark.xjobs_parity, pytest.mark.requires("rates")]

# 2 permits per second, both at once after an idle spell: a permit every 500 ms.
PAIR = RateBucket(key="job:parity_job:0", interval_ms=500.0, burst=2)


def _rates(parity: ParityEnv) -> RateStore:
    rates = parity.backend.rates
    assert rates is not None
    return rates


def _bucket(key: str, interval_ms: float = 500.0, burst: int = 2) -> RateBucket:
    return RateBucket(key=key, interval_ms=interval_ms, burst=burst)


class TestRateBuckets:
    async def test_an_idle_bucket_grants_its_burst_then_defers_by_one_interval(
        self, parity: ParityEnv
    ) -> None:
        """Rule: an idle bucket grants `burst` permits at once; the next waits one interval."""
        rates = _rates(parity)
        taken = [await rates.acquire([PAIR]) for _ in range(2)]
        over = await rates.acquire([PAIR])
        assert taken == [RateVerdict(True)] * 2
        assert over == RateVerdict(False, 500)

    async def test_a_refused_permit_is_free_exactly_when_the_wait_says(
        self, parity: ParityEnv
    ) -> None:
        """Rule: the wait is the time the next permit frees, on the store's clock: 1 ms early is refused."""
        rates = _rates(parity)
        await rates.acquire([PAIR])
        await rates.acquire([PAIR])
        parity.clock.advance(499)
        early = await rates.acquire([PAIR])
        parity.clock.advance(1)
        due = await rates.acquire([PAIR])
        assert (early, due) == (RateVerdict(False, 1), RateVerdict(True))

    async def test_a_window_never_admits_more_than_burst_plus_its_share(
        self, parity: ParityEnv
    ) -> None:
        """Rule: GCRA, not a fixed window: over 10 s a bucket of 2/s, burst 2, admits at most 2 + 20."""
        rates = _rates(parity)
        granted = 0
        for _ in range(100):  # a try every 100 ms, for 10 s
            granted += (await rates.acquire([PAIR])).granted
            parity.clock.advance(100)
        # the burst, then one per 500 ms from the first (the last at 9.5 s)
        assert granted == 2 + 19

    async def test_a_refused_acquire_takes_no_permit(self, parity: ParityEnv) -> None:
        """Rule: every bucket or none: a full bucket refuses the grant and the free one stays unspent."""
        rates = _rates(parity)
        full, free = _bucket("queue:parity:0", burst=1), _bucket("global:0")
        await rates.acquire([full])
        refused = await rates.acquire([free, full])
        assert refused == RateVerdict(False, 500)
        assert await rates.spent(free.key, free.interval_ms) == 0
        assert [await rates.acquire([free]) for _ in range(2)] == [RateVerdict(True)] * 2

    async def test_the_wait_is_that_of_the_bucket_that_frees_last(self, parity: ParityEnv) -> None:
        """Rule: refused, the wait is the longest of the full buckets' waits."""
        rates = _rates(parity)
        short, long = _bucket("a", 100.0, 1), _bucket("b", 1000.0, 1)
        await rates.acquire([short, long])
        assert await rates.acquire([short, long]) == RateVerdict(False, 1000)

    async def test_runs_refused_in_a_row_are_lined_up_an_interval_apart(
        self, parity: ParityEnv
    ) -> None:
        """Rule: a refused run is due at the later of the next free permit and the bucket's line;
        each refusal moves the line an interval on, so a backlog comes back spread, not as a herd."""
        rates = _rates(parity)
        single = _bucket("job:parity_job:0", burst=1)
        await rates.acquire([single])
        waits = [(await rates.acquire([single])).wait_ms for _ in range(3)]
        parity.clock.advance(500)
        turn = await rates.acquire([single])
        assert waits == [500, 1000, 1500]
        assert turn == RateVerdict(True)  # a free permit is granted whatever the line

    async def test_each_key_is_its_own_bucket(self, parity: ParityEnv) -> None:
        """Rule: a per-key limit: a full key does not hold another key back."""
        rates = _rates(parity)
        one, other = _bucket("job-key:j:0:org-1", burst=1), _bucket("job-key:j:0:org-2", burst=1)
        await rates.acquire([one])
        assert await rates.acquire([other]) == RateVerdict(True)
        assert await rates.acquire([one]) == RateVerdict(False, 500)

    async def test_spent_counts_the_permits_in_use(self, parity: ParityEnv) -> None:
        """Rule: `spent` is (TAT - now) / interval: 0 idle, one per grant, draining with time."""
        rates = _rates(parity)
        before = await rates.spent(PAIR.key, PAIR.interval_ms)
        await rates.acquire([PAIR])
        await rates.acquire([PAIR])
        full = await rates.spent(PAIR.key, PAIR.interval_ms)
        parity.clock.advance(250)
        assert (before, full, await rates.spent(PAIR.key, PAIR.interval_ms)) == (0, 2, 1.5)


class TestAcquireMany:
    async def test_the_grants_of_one_call_are_evaluated_in_order(self, parity: ParityEnv) -> None:
        """Rule: `acquire_many` takes its grants in turn: each sees the permits the ones before it took."""
        rates = _rates(parity)
        verdicts = await rates.acquire_many([[PAIR], [PAIR], [PAIR]])
        assert verdicts == [RateVerdict(True), RateVerdict(True), RateVerdict(False, 500)]
        assert await rates.spent(PAIR.key, PAIR.interval_ms) == 2

    async def test_runs_refused_in_one_call_are_lined_up_an_interval_apart(
        self, parity: ParityEnv
    ) -> None:
        """Rule: the refusals of one call move the bucket's line as refusals in a row do."""
        rates = _rates(parity)
        single = _bucket("job:parity_job:0", burst=1)
        waits = [v.wait_ms for v in await rates.acquire_many([[single]] * 4)]
        assert waits == [0, 500, 1000, 1500]

    async def test_a_refused_grant_takes_nothing_and_the_next_grant_goes_on(
        self, parity: ParityEnv
    ) -> None:
        """Rule: each grant is all-or-none: a grant refused by its full bucket leaves its free
        bucket unspent for the grants after it, which are still evaluated."""
        rates = _rates(parity)
        full, free = _bucket("queue:parity:0", burst=1), _bucket("global:0")
        await rates.acquire([full])
        verdicts = await rates.acquire_many([[free, full], [free], [free], [free]])
        refused, granted = RateVerdict(False, 500), RateVerdict(True)
        assert verdicts == [refused, granted, granted, refused]
        assert await rates.spent(full.key, full.interval_ms) == 1

    async def test_one_call_answers_as_the_same_acquires_in_a_row(self, parity: ParityEnv) -> None:
        """Rule: `acquire_many(grants)` answers what `acquire` of each grant in turn answers, and
        leaves the buckets as those acquires do."""
        rates = _rates(parity)

        def grants(tag: str) -> list[list[RateBucket]]:
            a, b, c = (
                _bucket(f"{tag}:a", 100.0, 2),
                _bucket(f"{tag}:b", 250.0, 1),
                _bucket(f"{tag}:c"),
            )
            return [[a, b], [a], [a, c], [b, c], [c], [], [a, b, c], [c]]

        many = await rates.acquire_many(grants("many"))
        in_a_row = [await rates.acquire(grant) for grant in grants("row")]
        spent = [
            [await rates.spent(b.key, b.interval_ms) for b in grants(tag)[6]]
            for tag in ("many", "row")
        ]
        assert many == in_a_row
        assert spent[0] == spent[1]
        assert await rates.acquire_many([]) == []


class TestAbandonAndRelease:
    async def test_an_abandoned_permit_is_free_again(self, parity: ParityEnv) -> None:
        """Rule: a permit taken for a run that never started is abandoned: the next acquire gets it."""
        rates = _rates(parity)
        await rates.acquire([PAIR])
        await rates.acquire([PAIR])
        await rates.abandon([PAIR])
        assert await rates.acquire([PAIR]) == RateVerdict(True)
        assert await rates.acquire([PAIR]) == RateVerdict(False, 500)

    async def test_a_permit_that_is_not_abandoned_stays_spent(self, parity: ParityEnv) -> None:
        """Rule: a run that started keeps its permit spent (there is no release that refills)."""
        rates = _rates(parity)
        await rates.acquire([PAIR])
        await rates.acquire([PAIR])
        parity.clock.advance(100)
        assert await rates.acquire([PAIR]) == RateVerdict(False, 400)

    async def test_an_abandon_never_refills_past_an_idle_bucket(self, parity: ParityEnv) -> None:
        """Rule: an abandon moves the TAT back one interval, never before now: an idle bucket still grants only its burst."""
        rates = _rates(parity)
        await rates.acquire([PAIR])
        parity.clock.advance(2_000)
        await rates.abandon([PAIR])
        granted = [(await rates.acquire([PAIR])).granted for _ in range(3)]
        assert granted == [True, True, False]

    async def test_an_abandon_gives_back_every_bucket_of_the_grant(self, parity: ParityEnv) -> None:
        """Rule: the permits of one grant go back together."""
        rates = _rates(parity)
        a, b = _bucket("a", burst=1), _bucket("b", burst=1)
        await rates.acquire([a, b])
        await rates.abandon([a, b])
        assert await rates.acquire([a]) == RateVerdict(True)
        assert await rates.acquire([b]) == RateVerdict(True)


class TestReservations:
    async def test_a_reservation_places_its_permits_after_the_hold(self, parity: ParityEnv) -> None:
        """Rule: `reserve(count, hold)` moves the TAT to max(TAT, now + hold) + count intervals."""
        rates = _rates(parity)
        idle, busy = _bucket("idle", 100.0, 100), _bucket("busy", 100.0, 100)
        await rates.acquire([busy])
        await rates.acquire([busy])  # busy's TAT is now + 200
        assert await rates.reserve([idle], 8, 200) is True
        assert await rates.reserve([busy], 5, 100) is True
        assert await rates.spent(idle.key, 100.0) == (200 + 8 * 100) / 100
        assert await rates.spent(busy.key, 100.0) == (200 + 5 * 100) / 100

    async def test_per_run_grants_after_a_reservation_stay_within_the_burst(
        self, parity: ParityEnv
    ) -> None:
        """Rule: the held permits and the hold count against the bucket: what is granted at once stays under the burst."""
        rates = _rates(parity)
        bucket = _bucket("twenty", 100.0, 20)
        assert await rates.reserve([bucket], 3, 200) is True  # TAT now + 500
        granted = [(await rates.acquire([bucket])).granted for _ in range(16)]
        assert granted == [True] * 15 + [False]  # 3 held + 15 <= 20

    async def test_a_reservation_that_would_leave_under_half_the_burst_is_refused(
        self, parity: ParityEnv
    ) -> None:
        """Rule: refused when a TAT would move more than half the burst past now; nothing moves."""
        rates = _rates(parity)
        ten = _bucket("ten", 100.0, 10)  # half its burst: 500 ms
        assert await rates.reserve([ten], 4, 200) is False  # 200 + 400 > 500
        assert await rates.spent(ten.key, 100.0) == 0
        assert await rates.reserve([ten], 3, 200) is True  # 200 + 300 = 500
        assert await rates.spent(ten.key, 100.0) == 5

    async def test_a_reservation_is_all_or_none_over_its_buckets(self, parity: ParityEnv) -> None:
        """Rule: one bucket that cannot hold the allotment refuses it for every bucket."""
        rates = _rates(parity)
        roomy, tight = _bucket("roomy", 100.0, 1_000), _bucket("tight", 100.0, 4)
        assert await rates.reserve([roomy, tight], 2, 100) is False
        assert await rates.spent(roomy.key, 100.0) == 0
        assert await rates.acquire([tight]) == RateVerdict(True)

    async def test_a_held_permit_abandoned_is_handed_back(self, parity: ParityEnv) -> None:
        """Rule: a held permit whose run never started is abandoned like a per-run one: one interval back."""
        rates = _rates(parity)
        bucket = _bucket("held", 100.0, 100)
        assert await rates.reserve([bucket], 4, 0) is True
        await rates.abandon([bucket])
        assert await rates.spent(bucket.key, 100.0) == 3
