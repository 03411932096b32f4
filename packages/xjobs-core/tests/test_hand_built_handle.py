"""Registration refuses a `JobHandle` built by hand: only `job()` runs the declaration checks."""

from __future__ import annotations

from types import ModuleType

import pytest
from pydantic import BaseModel

from xjobs import App, JobContext, Retry, job, task
from xjobs.declare.job import NO_REDACTION, JobHandle
from xjobs.errors import DeclarationInvalidError


class Item(BaseModel):
    key: str


async def body(ctx: JobContext, value: Item) -> None:
    """The body both handles share."""


def _hand_built() -> JobHandle[Item]:
    """A handle whose tenant and key were never checked (job() refuses both)."""
    return JobHandle(
        fn=body,
        input_model=Item,
        tenant=None,  # type: ignore[arg-type]
        idempotency_key="not a callable",  # type: ignore[arg-type]
        queue="default",
        priority=0,
        retry=Retry(),
        timeout_ms=None,
        step_timeout_ms=None,
        event_poll_ms=None,
        concurrency=None,
        declared_name="hand_built",
        redact=NO_REDACTION,
        on_settled=None,
    )


def test_a_hand_built_handle_is_refused_at_registration() -> None:
    with pytest.raises(DeclarationInvalidError) as refused:
        App("memory://", jobs=[_hand_built()], retention=None)
    assert refused.value.code == "XJOBS_DECLARATION_INVALID"
    assert "not built by job()" in str(refused.value)


def test_a_hand_built_handle_exported_by_a_module_is_refused() -> None:
    module = ModuleType("hand_jobs")
    module.hand_built = _hand_built()  # type: ignore[attr-defined]
    with pytest.raises(DeclarationInvalidError):
        App("memory://", jobs=[module], retention=None)


def test_a_task_firing_a_hand_built_handle_is_refused() -> None:
    fires = task(job=_hand_built(), cron="0 * * * *", tz="UTC", input=lambda _: Item(key="k"))
    with pytest.raises(DeclarationInvalidError):
        App("memory://", tasks=[fires], retention=None)


def test_a_handle_job_built_registers() -> None:
    declared = job(body, tenant="none", idempotency_key=lambda v: v.key, name="declared")
    assert declared.built
    assert not _hand_built().built
    assert list(App("memory://", jobs=[declared], retention=None).jobs) == ["declared"]
