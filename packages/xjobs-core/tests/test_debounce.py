"""Debounce and throttle in core: the options' checks, the per-key fold of a batch, the outbox refusal."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from pydantic import BaseModel

import xjobs
from xjobs import JobContext, ManualClock, job
from xjobs.contract.driver import EnqueueResult
from xjobs.declare.job import EnqueueOptions
from xjobs.enqueue.facade import JobsFacade
from xjobs.enqueue.flow import Flow, fold, resolve_flow
from xjobs.errors import OptionInvalidError
from xjobs.testing.rows import new_job


class Edit(BaseModel):
    """A test input: its key and a text that varies."""

    key: str
    text: str = ""


def _key(value: Edit) -> str:
    return value.key


@job(tenant="none", idempotency_key=_key, name="edited")
async def edited(ctx: JobContext, input: Edit) -> None:
    """A job to stage."""


def test_no_flow_option_is_no_flow() -> None:
    assert resolve_flow(EnqueueOptions(delay=timedelta(seconds=1), priority=3)) is None


def test_windows_resolve_to_whole_milliseconds() -> None:
    assert resolve_flow(EnqueueOptions(debounce=timedelta(seconds=2))) == Flow(2_000, None)
    assert resolve_flow(EnqueueOptions(throttle=timedelta(milliseconds=250))) == Flow(None, 250)


def test_throttle_may_be_delayed() -> None:
    options = EnqueueOptions(throttle=timedelta(seconds=1), delay=timedelta(seconds=5))
    assert resolve_flow(options) == Flow(None, 1_000)


@pytest.mark.parametrize(
    ("options", "names"),
    [
        (EnqueueOptions(debounce=timedelta(seconds=1), throttle=timedelta(seconds=1)), "not both"),
        (EnqueueOptions(debounce=timedelta(seconds=-1)), "debounce must be positive"),
        (EnqueueOptions(throttle=timedelta(0)), "throttle must be positive"),
        (
            EnqueueOptions(debounce=timedelta(seconds=1), run_at=datetime(2030, 1, 1, tzinfo=UTC)),
            "without delay= or run_at=",
        ),
        (EnqueueOptions(throttle="soon"), "throttle must be a timedelta"),  # type: ignore[arg-type]
    ],
)
def test_bad_flow_options_name_what_is_wrong(options: EnqueueOptions, names: str) -> None:
    with pytest.raises(OptionInvalidError, match=names) as caught:
        resolve_flow(options)
    assert caught.value.code == "XJOBS_OPTION_INVALID"


def test_a_debounced_fold_keeps_the_first_id_and_the_last_input() -> None:
    rows = [
        new_job(idempotency_key="a", payload='{"n": 1}', enqueued_by="u1"),
        new_job(idempotency_key="b", payload='{"n": 1}'),
        new_job(idempotency_key="a", payload='{"n": 2}', enqueued_by="u2"),
    ]
    folded = fold(rows, Flow(5_000, None))
    assert folded.slots == [0, 1, 0]
    assert [(r.id, r.payload, r.debounce_ms) for r in folded.rows] == [
        (rows[0].id, '{"n": 2}', 5_000),
        (rows[1].id, '{"n": 1}', 5_000),
    ]
    assert folded.rows[0].enqueued_by == "u2"


def test_a_throttled_fold_keeps_the_first_input() -> None:
    rows = [
        new_job(idempotency_key="a", payload='{"n": 1}'),
        new_job(idempotency_key="a", payload='{"n": 2}'),
    ]
    folded = fold(rows, Flow(None, 1_000))
    assert [(r.payload, r.throttle_ms, r.debounce_ms) for r in folded.rows] == [
        ('{"n": 1}', 1_000, None)
    ]


def test_another_tenant_folds_apart() -> None:
    rows = [new_job(idempotency_key="a", tenant_id=t) for t in (None, "", "org-1")]
    assert fold(rows, Flow(1, None)).slots == [0, 0, 1]


def test_answers_repeat_the_key_s_job_as_deduped() -> None:
    rows = [new_job(idempotency_key=k) for k in ("a", "b", "a")]
    folded = fold(rows, Flow(1, None))
    answered = [EnqueueResult("j1", "r1", False), EnqueueResult("j2", "r2", True)]
    assert folded.answers(answered) == [
        EnqueueResult("j1", "r1", False),
        EnqueueResult("j2", "r2", True),
        EnqueueResult("j1", "r1", True),
    ]


@pytest.mark.asyncio
async def test_a_flow_option_is_refused_through_the_outbox() -> None:
    backend = await xjobs.connect("memory://", clock=ManualClock())
    assert backend.outbox is not None
    facade = JobsFacade(backend.jobs, backend.clock, max_payload_bytes=1_000, outbox=backend.outbox)
    with pytest.raises(OptionInvalidError, match="enqueue instead of stage"):
        facade.stage_inputs(
            edited, object(), [Edit(key="a")], EnqueueOptions(throttle=timedelta(seconds=1))
        )
