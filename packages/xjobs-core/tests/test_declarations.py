"""`job()` validates every option once, at declaration, and refuses each mistake by name (job.py)."""

from __future__ import annotations

import math
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from pydantic import BaseModel

from xjobs import Concurrency, JobHandle, Retry, job
from xjobs.declare.concurrency import ResolvedConcurrency
from xjobs.errors import (
    AppStateError,
    DeclarationInvalidError,
    IdempotencyKeyRequiredError,
    KeyUnderivableError,
    OptionInvalidError,
    QueueNameInvalidError,
    TenantRequiredError,
)


class Invoice(BaseModel):
    org_id: str
    invoice_id: str


class Refund(BaseModel):
    refund_id: str


async def send_invoice(ctx: object, input: Invoice) -> None:
    """A well-formed body: (ctx, input) with the input annotated by its model."""


async def unannotated(ctx, input):  # type: ignore[no-untyped-def]
    """A body that says nothing about its input."""


async def annotated_with_dict(ctx: object, input: dict[str, Any]) -> None:
    """A body whose input annotation is not a pydantic model."""


async def annotated_with_a_missing_name(ctx: object, input: NoSuchModel) -> None:  # type: ignore[name-defined]  # noqa: F821
    """A body whose annotation cannot be resolved."""


def declare(**options: Any) -> JobHandle[Any]:
    """`job(send_invoice, ...)` with the two required callables unless a test overrides them."""
    options.setdefault("tenant", lambda i: i.org_id)
    options.setdefault("idempotency_key", lambda i: i.invoice_id)
    return job(send_invoice, **options)


def assert_option_refused(caught: pytest.ExceptionInfo[OptionInvalidError], option: str) -> None:
    assert caught.value.code == "XJOBS_OPTION_INVALID"
    assert option in caught.value.message


# -- the body --------------------------------------------------------------------------------


def test_a_well_formed_declaration_builds_a_handle() -> None:
    handle = declare()
    assert isinstance(handle, JobHandle)
    assert handle.fn is send_invoice
    assert handle.queue == "default"
    assert handle.priority == 0


def test_job_works_as_a_decorator() -> None:
    @job(tenant="none", idempotency_key=lambda i: i.refund_id, queue="refunds")
    async def refund(ctx: object, input: Refund) -> None: ...

    assert isinstance(refund, JobHandle)
    assert refund.queue == "refunds"
    assert refund.input_model is Refund


def test_a_plain_def_body_is_declared_as_a_sync_job() -> None:
    def sync_body(ctx: object, input: Invoice) -> None: ...

    handle = job(sync_body, tenant="none", idempotency_key=lambda i: i.invoice_id)
    assert (handle.sync, handle.input_model) == (True, Invoice)


def test_an_async_body_is_not_a_sync_job() -> None:
    async def async_body(ctx: object, input: Invoice) -> None: ...

    assert job(async_body, tenant="none", idempotency_key=lambda i: i.invoice_id).sync is False


@pytest.mark.parametrize("option", ["step_timeout", "event_poll"])
def test_a_plain_def_body_refuses_step_options(option: str) -> None:
    def sync_body(ctx: object, input: Invoice) -> None: ...

    with pytest.raises(DeclarationInvalidError) as caught:
        job(  # type: ignore[call-overload]
            sync_body,
            tenant="none",
            idempotency_key=lambda i: i.invoice_id,
            **{option: timedelta(seconds=1)},
        )
    assert option in caught.value.message
    assert "async def" in caught.value.message


def test_a_generator_is_not_a_job_body() -> None:
    def gen_body(ctx: object, input: Invoice) -> Iterator[None]:
        yield None

    with pytest.raises(DeclarationInvalidError) as caught:
        job(gen_body, tenant="none", idempotency_key=lambda i: i.invoice_id)
    assert "gen_body" in caught.value.message


@pytest.mark.parametrize("arity", [0, 1, 3])
def test_a_job_body_must_take_ctx_and_input(arity: int) -> None:
    bodies = {
        0: _takes_nothing,
        1: _takes_only_input,
        3: _takes_three,
    }
    with pytest.raises(DeclarationInvalidError) as caught:
        job(bodies[arity], tenant="none", idempotency_key=lambda i: i.invoice_id)  # type: ignore[call-overload]
    assert caught.value.code == "XJOBS_DECLARATION_INVALID"
    assert "(ctx, input)" in caught.value.message


@pytest.mark.parametrize("body", ["one", "three"])
def test_a_job_body_must_take_ctx_and_input_even_with_an_explicit_model(body: str) -> None:
    fn = {"one": _takes_only_input, "three": _takes_three}[body]
    with pytest.raises(DeclarationInvalidError) as caught:
        job(fn, tenant="none", idempotency_key=lambda i: i.invoice_id, input_model=Invoice)  # type: ignore[call-overload]
    assert caught.value.code == "XJOBS_DECLARATION_INVALID"
    assert "(ctx, input)" in caught.value.message


async def _takes_nothing() -> None: ...


async def _takes_only_input(input: Invoice) -> None: ...


async def _takes_three(ctx: object, input: Invoice, extra: int) -> None: ...


# -- the input model -------------------------------------------------------------------------


def test_the_input_model_is_read_from_the_input_annotation() -> None:
    assert declare().input_model is Invoice


def test_the_input_model_may_be_given_explicitly() -> None:
    handle = job(
        unannotated, tenant="none", idempotency_key=lambda i: i.refund_id, input_model=Refund
    )
    assert handle.input_model is Refund


def test_an_explicit_input_model_wins_over_the_annotation() -> None:
    handle = declare(input_model=Refund, tenant="none", idempotency_key=lambda i: i.refund_id)
    assert handle.input_model is Refund


def test_an_unannotated_input_without_a_model_is_refused() -> None:
    with pytest.raises(DeclarationInvalidError) as caught:
        job(unannotated, tenant="none", idempotency_key=lambda i: "k")
    assert caught.value.code == "XJOBS_DECLARATION_INVALID"
    assert "input_model=" in caught.value.message


def test_a_non_model_annotation_is_refused() -> None:
    with pytest.raises(DeclarationInvalidError) as caught:
        job(annotated_with_dict, tenant="none", idempotency_key=lambda i: "k")  # type: ignore[type-var]
    assert caught.value.code == "XJOBS_DECLARATION_INVALID"
    assert "pydantic model" in caught.value.message
    assert "annotated_with_dict" in caught.value.message


def test_an_annotation_that_does_not_resolve_is_refused() -> None:
    with pytest.raises(DeclarationInvalidError) as caught:
        job(annotated_with_a_missing_name, tenant="none", idempotency_key=lambda i: "k")
    assert caught.value.code == "XJOBS_DECLARATION_INVALID"
    assert "input_model=" in caught.value.message


@pytest.mark.parametrize("model", [dict, Invoice(org_id="o", invoice_id="i"), "Invoice", int])
def test_an_explicit_input_model_must_be_a_model_class(model: object) -> None:
    with pytest.raises(DeclarationInvalidError) as caught:
        declare(input_model=model)
    assert caught.value.code == "XJOBS_DECLARATION_INVALID"
    assert "input_model" in caught.value.message


# -- tenant and idempotency key --------------------------------------------------------------


@pytest.mark.parametrize("tenant", [None, "", "None", "all", "NONE", 1, ["none"]], ids=repr)
def test_tenant_is_required_as_a_callable_or_none(tenant: object) -> None:
    with pytest.raises(TenantRequiredError) as caught:
        declare(tenant=tenant)
    assert caught.value.code == "XJOBS_TENANT_REQUIRED"
    assert "tenant=" in caught.value.message
    assert "send_invoice" in caught.value.message


def test_tenant_none_declares_a_cross_tenant_job() -> None:
    handle = declare(tenant="none")
    assert handle.tenant.derive is None
    assert handle.tenant_for(Invoice(org_id="o1", invoice_id="i1")) is None


def test_a_tenant_callable_derives_the_run_org_from_the_input() -> None:
    handle = declare()
    assert handle.tenant_for(Invoice(org_id="o1", invoice_id="i1")) == "o1"


@pytest.mark.parametrize(
    "derive", [lambda i: "", lambda i: 7, lambda i: 1 / 0], ids=["empty", "int", "raises"]
)
def test_a_tenant_that_cannot_be_derived_is_refused(derive: Any) -> None:
    handle = declare(tenant=derive)
    with pytest.raises(KeyUnderivableError) as caught:
        handle.tenant_for(Invoice(org_id="o1", invoice_id="i1"))
    assert caught.value.code == "XJOBS_KEY_UNDERIVABLE"
    assert "tenant" in caught.value.message


@pytest.mark.parametrize("key", [None, "invoice_id", 3], ids=repr)
def test_idempotency_key_is_required_as_a_callable(key: object) -> None:
    with pytest.raises(IdempotencyKeyRequiredError) as caught:
        declare(idempotency_key=key)
    assert caught.value.code == "XJOBS_IDEMPOTENCY_KEY_REQUIRED"
    assert "idempotency_key=" in caught.value.message
    assert "send_invoice" in caught.value.message


def test_the_idempotency_key_is_derived_from_the_input() -> None:
    assert declare().key_for(Invoice(org_id="o1", invoice_id="i9")) == "i9"


@pytest.mark.parametrize(
    "derive", [lambda i: "", lambda i: 7, lambda i: 1 / 0], ids=["empty", "int", "raises"]
)
def test_an_idempotency_key_that_cannot_be_derived_is_refused(derive: Any) -> None:
    handle = declare(idempotency_key=derive)
    with pytest.raises(KeyUnderivableError) as caught:
        handle.key_for(Invoice(org_id="o1", invoice_id="i1"))
    assert caught.value.code == "XJOBS_KEY_UNDERIVABLE"
    assert "idempotency key" in caught.value.message


# -- retry -----------------------------------------------------------------------------------


@pytest.mark.parametrize("attempts", [0, -1, math.nan, math.inf, 1.5, True, False, 1001], ids=repr)
def test_retry_attempts_out_of_range_or_not_whole_are_refused(attempts: object) -> None:
    with pytest.raises(OptionInvalidError) as caught:
        Retry(attempts=attempts)  # type: ignore[arg-type]
    assert_option_refused(caught, "retry.attempts")


def test_retry_attempts_may_be_a_whole_float() -> None:
    assert Retry(attempts=3.0).attempts == 3  # type: ignore[arg-type]


def test_retry_cap_below_base_is_refused() -> None:
    with pytest.raises(OptionInvalidError) as caught:
        Retry(base=timedelta(seconds=10), cap=timedelta(seconds=1))
    assert_option_refused(caught, "retry.cap")
    assert "retry.base" in caught.value.message


@pytest.mark.parametrize("option", ["base", "cap"])
@pytest.mark.parametrize("value", [timedelta(seconds=-1), math.inf, math.nan, "1s"], ids=repr)
def test_retry_durations_must_be_finite_and_not_negative(option: str, value: object) -> None:
    with pytest.raises(OptionInvalidError) as caught:
        Retry(**{option: value})  # type: ignore[arg-type]
    assert_option_refused(caught, f"retry.{option}")


def test_retry_dead_letter_must_be_a_bool() -> None:
    with pytest.raises(OptionInvalidError) as caught:
        Retry(dead_letter="yes")  # type: ignore[arg-type]
    assert_option_refused(caught, "retry.dead_letter")


def test_retry_must_be_a_retry() -> None:
    with pytest.raises(DeclarationInvalidError) as caught:
        declare(retry={"attempts": 3})
    assert caught.value.code == "XJOBS_DECLARATION_INVALID"
    assert "retry" in caught.value.message


def test_the_declared_retry_is_kept() -> None:
    retry = Retry(attempts=2, dead_letter=False)
    assert declare(retry=retry).retry is retry


# -- durations -------------------------------------------------------------------------------


DURATION_OPTIONS = ["timeout", "step_timeout", "event_poll"]


@pytest.mark.parametrize("option", DURATION_OPTIONS)
@pytest.mark.parametrize(
    "value", [timedelta(0), timedelta(seconds=-1), 0, -5, math.inf, -math.inf, math.nan], ids=repr
)
def test_durations_must_be_positive_and_finite(option: str, value: object) -> None:
    with pytest.raises(OptionInvalidError) as caught:
        declare(**{option: value})
    assert_option_refused(caught, option)


@pytest.mark.parametrize("option", DURATION_OPTIONS)
def test_a_duration_that_is_not_a_duration_is_refused(option: str) -> None:
    with pytest.raises(OptionInvalidError) as caught:
        declare(**{option: "5m"})
    assert_option_refused(caught, option)


def test_durations_are_kept_in_milliseconds() -> None:
    handle = declare(
        timeout=timedelta(minutes=5),
        step_timeout=timedelta(seconds=30),
        event_poll=timedelta(seconds=2),
    )
    assert (handle.timeout_ms, handle.step_timeout_ms, handle.event_poll_ms) == (
        300_000,
        30_000,
        2000,
    )


def test_durations_are_unset_by_default() -> None:
    handle = declare()
    assert (handle.timeout_ms, handle.step_timeout_ms, handle.event_poll_ms) == (None, None, None)


# -- priority --------------------------------------------------------------------------------


@pytest.mark.parametrize("priority", [-1, 10, 1.5, math.nan, math.inf, True, "1"], ids=repr)
def test_priority_outside_zero_to_nine_is_refused(priority: object) -> None:
    with pytest.raises(OptionInvalidError) as caught:
        declare(priority=priority)
    assert_option_refused(caught, "priority")


@pytest.mark.parametrize("priority", [0, 9])
def test_priority_bounds_are_inclusive(priority: int) -> None:
    assert declare(priority=priority).priority == priority


# -- queue and job names ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "queue",
    [
        "",
        "a" * 81,
        "a:b",
        "{x}",
        "*",
        "a\nb",
        "default\n",
        'a"b',
        "a'b",
        "../",
        "a/b",
        "a b",
        "-leading",
        "_leading",
        "d\u0435fault",  # a Cyrillic е that looks like "default"
        "caf\u00e9",
        None,
        7,
    ],
    ids=repr,
)
def test_an_invalid_queue_name_is_refused(queue: object) -> None:
    with pytest.raises(QueueNameInvalidError) as caught:
        declare(queue=queue)
    assert caught.value.code == "XJOBS_QUEUE_INVALID"
    assert "queue" in caught.value.message


@pytest.mark.parametrize("queue", ["a", "a" * 80, "billing", "Billing-2_x", "0queue"])
def test_a_valid_queue_name_is_kept(queue: str) -> None:
    assert declare(queue=queue).queue == queue


@pytest.mark.parametrize(
    "name",
    ["", "1job", "a b", "a:b", "a/b", "j" * 129, "caf\u00e9", "j\u043eb", "a\n", 5],
    ids=repr,
)
def test_an_invalid_job_name_is_refused(name: object) -> None:
    with pytest.raises(DeclarationInvalidError) as caught:
        declare(name=name)
    assert caught.value.code == "XJOBS_DECLARATION_INVALID"
    assert "job name" in caught.value.message


@pytest.mark.parametrize("name", ["billing.send_invoice", "_private", "a-b", "j" * 128])
def test_a_declared_name_is_the_handle_name(name: str) -> None:
    handle = declare(name=name)
    assert handle.name == name
    assert handle.declared_name == name


def test_an_undeclared_name_reads_as_the_function_name_until_stamped() -> None:
    handle = declare()
    assert handle.name == "send_invoice"
    assert not handle.stamped


# -- concurrency -----------------------------------------------------------------------------


def test_concurrency_zero_is_a_hard_stop_not_unlimited() -> None:
    handle = declare(concurrency=0)
    assert handle.concurrency == ResolvedConcurrency(limit=0)
    assert handle.concurrency is not None
    assert handle.concurrency.limit == 0


def test_a_keyed_concurrency_of_zero_is_a_hard_stop_too() -> None:
    handle = declare(concurrency=Concurrency(key=lambda i: i.org_id, limit=0))
    assert handle.concurrency is not None
    assert handle.concurrency.limit == 0


def test_no_concurrency_means_no_limit_declared() -> None:
    assert declare().concurrency is None


@pytest.mark.parametrize("value", [-1, math.nan, math.inf, 1.5, True, "2", 100_001], ids=repr)
def test_an_invalid_concurrency_limit_is_refused(value: object) -> None:
    with pytest.raises(OptionInvalidError) as caught:
        declare(concurrency=value)
    assert_option_refused(caught, "concurrency")


@pytest.mark.parametrize("limit", [-1, math.nan, math.inf, 2.5], ids=repr)
def test_an_invalid_keyed_concurrency_limit_is_refused(limit: object) -> None:
    with pytest.raises(OptionInvalidError) as caught:
        declare(concurrency=Concurrency(key=lambda i: i.org_id, limit=limit))  # type: ignore[arg-type]
    assert_option_refused(caught, "concurrency.limit")


def test_when_busy_must_be_wait_or_fail() -> None:
    with pytest.raises(DeclarationInvalidError) as caught:
        declare(concurrency=Concurrency(key=lambda i: i.org_id, limit=1, when_busy="maybe"))  # type: ignore[arg-type]
    assert caught.value.code == "XJOBS_DECLARATION_INVALID"
    assert "when_busy" in caught.value.message
    assert "maybe" in caught.value.message


def test_a_concurrency_key_must_be_callable() -> None:
    with pytest.raises(DeclarationInvalidError) as caught:
        declare(concurrency=Concurrency(key="org_id", limit=1))  # type: ignore[arg-type]
    assert caught.value.code == "XJOBS_DECLARATION_INVALID"
    assert "concurrency.key" in caught.value.message


@pytest.mark.parametrize("when_busy", ["wait", "fail"])
def test_a_keyed_concurrency_keeps_what_a_busy_key_does(when_busy: Any) -> None:
    handle = declare(concurrency=Concurrency(key=lambda i: i.org_id, limit=2, when_busy=when_busy))
    assert handle.concurrency is not None
    assert (handle.concurrency.limit, handle.concurrency.when_busy) == (2, when_busy)


def test_a_fleet_wide_lease_key_is_job_and_name() -> None:
    handle = declare(concurrency=3, name="billing.send")
    assert handle.concurrency is not None
    assert (
        handle.concurrency.lease_key(handle.name, Invoice(org_id="o", invoice_id="i"))
        == "job:billing.send"
    )


def test_a_keyed_lease_key_is_job_key_url_encoded_name_and_key() -> None:
    handle = declare(concurrency=Concurrency(key=lambda i: i.org_id, limit=1), name="billing.send")
    assert handle.concurrency is not None
    value = Invoice(org_id="org-7", invoice_id="i")
    assert handle.concurrency.lease_key(handle.name, value) == "job-key:billing.send:org-7"


def test_the_name_in_a_keyed_lease_key_is_url_encoded() -> None:
    resolved = ResolvedConcurrency(limit=1, key=lambda i: "k1", when_busy="wait")
    assert resolved.lease_key("a:b/c d", None) == "job-key:a%3Ab%2Fc%20d:k1"


@pytest.mark.parametrize(
    "derive", [lambda i: "", lambda i: None, lambda i: 1 / 0], ids=["empty", "none", "raises"]
)
def test_a_concurrency_key_that_cannot_be_derived_is_refused(derive: Any) -> None:
    resolved = ResolvedConcurrency(limit=1, key=derive, when_busy="wait")
    with pytest.raises(KeyUnderivableError) as caught:
        resolved.lease_key("send", Invoice(org_id="o", invoice_id="i"))
    assert caught.value.code == "XJOBS_KEY_UNDERIVABLE"
    assert "concurrency key" in caught.value.message


# -- hooks and the handle --------------------------------------------------------------------


@pytest.mark.parametrize("hook", ["redact_input", "on_settled"])
def test_a_hook_must_be_callable(hook: str) -> None:
    with pytest.raises(DeclarationInvalidError) as caught:
        declare(**{hook: "not callable"})
    assert caught.value.code == "XJOBS_DECLARATION_INVALID"
    assert hook in caught.value.message


@pytest.mark.asyncio
async def test_a_handle_enqueues_only_once_an_app_binds_it() -> None:
    handle = declare()
    with pytest.raises(AppStateError) as caught:
        await handle.enqueue(Invoice(org_id="o", invoice_id="i"))
    assert caught.value.code == "XJOBS_APP_STATE"
    assert "send_invoice" in caught.value.message


def test_two_declarations_of_one_body_are_two_handles() -> None:
    assert declare() is not declare()
