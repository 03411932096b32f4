"""`Rate` declared on a job and a worker (declare/rate.py), and the per-process fast path (run/admit.py)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from pydantic import BaseModel

from xjobs import Rate, job
from xjobs.clock import ManualClock
from xjobs.contract.rates import RateBucket
from xjobs.declare.rate import ResolvedRate, job_scope, resolve_rate, resolve_rates
from xjobs.errors import DeclarationInvalidError, KeyUnderivableError, OptionInvalidError
from xjobs.roles.worker_options import resolve_worker_options
from xjobs.run.local_rates import LocalRates


class Invoice(BaseModel):
    org_id: str
    invoice_id: str


async def send_invoice(ctx: object, input: Invoice) -> None:
    """A well-formed body."""


def _org(value: Invoice) -> str:
    return value.org_id


def _declare(rate: Any) -> Any:
    return job(
        send_invoice,
        tenant=_org,
        idempotency_key=lambda i: i.invoice_id,
        rate=rate,
        name="send_invoice",
    )


class TestDeclaration:
    def test_a_rate_resolves_to_its_interval_and_a_burst_of_its_limit(self) -> None:
        resolved = resolve_rate(Rate(limit=100, per=timedelta(seconds=1)), what="rate")
        assert resolved == ResolvedRate(limit=100, per_ms=1000, burst=100)
        assert resolved.interval_ms == 10.0

    def test_an_explicit_burst_is_kept(self) -> None:
        resolved = resolve_rate(Rate(limit=50, per=timedelta(seconds=1), burst=5), what="rate")
        assert resolved.burst == 5

    @pytest.mark.parametrize(
        ("rate", "named"),
        [
            (Rate(limit=0, per=timedelta(seconds=1)), "rate.limit"),
            (Rate(limit=1, per=timedelta(0)), "rate.per"),
            (Rate(limit=1, per=timedelta(seconds=-1)), "rate.per"),
            (Rate(limit=1, per=timedelta(seconds=1), burst=0), "rate.burst"),
            (Rate(limit=1.5, per=timedelta(seconds=1)), "rate.limit"),  # type: ignore[arg-type]
        ],
    )
    def test_a_bad_rate_is_refused_by_name(self, rate: Rate, named: str) -> None:
        with pytest.raises(OptionInvalidError, match=named):
            resolve_rate(rate, what="rate")

    def test_a_key_that_is_not_callable_is_refused(self) -> None:
        with pytest.raises(DeclarationInvalidError, match=r"rate\.key"):
            resolve_rate(Rate(limit=1, per=timedelta(seconds=1), key="org"), what="rate")  # type: ignore[arg-type]

    def test_a_value_that_is_not_a_rate_is_refused(self) -> None:
        with pytest.raises(DeclarationInvalidError, match=r"xjobs\.Rate"):
            resolve_rates(100, what="rate")

    def test_job_takes_one_rate_or_several(self) -> None:
        one = _declare(Rate(limit=5, per=timedelta(seconds=1)))
        two = _declare(
            [Rate(limit=5, per=timedelta(seconds=1)), Rate(limit=100, per=timedelta(minutes=1))]
        )
        none = _declare(None)
        assert [r.limit for r in one.rates] == [5]
        assert [r.limit for r in two.rates] == [5, 100]
        assert none.rates == ()

    def test_job_refuses_a_bad_rate_at_declaration(self) -> None:
        with pytest.raises(OptionInvalidError, match="rate of job"):
            _declare(Rate(limit=-1, per=timedelta(seconds=1)))


class TestBuckets:
    def test_an_unkeyed_rate_is_one_bucket_per_job_and_index(self) -> None:
        resolved = resolve_rate(Rate(limit=4, per=timedelta(seconds=2)), what="rate")
        bucket = resolved.bucket(job_scope("send invoice", 0), None, job="send invoice")
        assert bucket == RateBucket(key="job:send%20invoice:0", interval_ms=500.0, burst=4)

    def test_a_keyed_rate_is_a_bucket_per_derived_key(self) -> None:
        resolved = resolve_rate(Rate(limit=1, per=timedelta(seconds=1), key=_org), what="rate")
        value = Invoice(org_id="acme", invoice_id="i-1")
        bucket = resolved.bucket(job_scope("send_invoice", 1), value, job="send_invoice")
        assert bucket.key == "job:send_invoice:1:acme"

    def test_an_underivable_key_is_refused(self) -> None:
        resolved = resolve_rate(
            Rate(limit=1, per=timedelta(seconds=1), key=lambda i: ""), what="rate"
        )
        with pytest.raises(KeyUnderivableError, match="rate key"):
            resolved.bucket("job:x:0", None, job="x")


class TestWorkerRates:
    def test_queue_and_global_rates_resolve(self) -> None:
        options = resolve_worker_options(
            queues=["default", "mail"],
            queue_rates={"mail": Rate(limit=10, per=timedelta(seconds=1))},
            global_rate=Rate(limit=1000, per=timedelta(minutes=1)),
        )
        assert [r.limit for r in options.queue_rates["mail"]] == [10]
        assert "default" not in options.queue_rates
        assert [r.limit for r in options.global_rates] == [1000]

    def test_a_queue_rate_for_a_queue_not_served_is_refused(self) -> None:
        with pytest.raises(OptionInvalidError, match="queue_rates"):
            resolve_worker_options(
                queues=["default"], queue_rates={"mail": Rate(limit=1, per=timedelta(seconds=1))}
            )


class TestLocalFastPath:
    BUCKET = RateBucket(key="job:j:0", interval_ms=100.0, burst=2)

    def test_an_unknown_bucket_asks_the_store(self) -> None:
        assert LocalRates(ManualClock()).wait_ms([self.BUCKET]) == 0

    def test_own_grants_that_fill_the_bucket_refuse_locally_until_a_permit_frees(self) -> None:
        clock = ManualClock()
        local = LocalRates(clock)
        local.took([self.BUCKET])
        first = local.wait_ms([self.BUCKET])
        local.took([self.BUCKET])
        full = local.wait_ms([self.BUCKET])
        clock.advance(100)
        freed = local.wait_ms([self.BUCKET])
        assert (first, full, freed) == (0, 100, 0)

    def test_a_given_back_grant_frees_its_permit_locally(self) -> None:
        local = LocalRates(ManualClock())
        local.took([self.BUCKET])
        local.took([self.BUCKET])
        local.gave_back([self.BUCKET])
        assert local.wait_ms([self.BUCKET]) == 0
