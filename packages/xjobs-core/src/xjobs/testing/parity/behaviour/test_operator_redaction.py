"""Parity: what an operator reads of a job goes through its `redact` hooks, and fails closed (semantics.md, "Operator surface")."""

from __future__ import annotations

import json
from typing import Any

import pytest

from xjobs import JobContext, job
from xjobs.declare.job import Redact
from xjobs.operate.detail import JobDetail
from xjobs.testing.parity.env import ParityEnv
from xjobs.testing.parity.jobs import QUEUE, Item, key_of

pytestmark = [
    pytest.mark.xjobs_parity,
    pytest.mark.requires("introspection"),
    pytest.mark.requires("steps"),
]

SECRET = "sk_live_4eC39HqLyjWDarjtT1zdp7dc"


def _everything(detail: JobDetail) -> str:
    """Every value of the detail an operator surface prints, as one text."""
    return json.dumps(
        {
            "input": detail.input,
            "record": [str(v) for v in vars_of(detail.record)],
            "steps": [[s.name, s.result, s.error] for s in detail.steps],
        }
    )


def vars_of(record: object) -> list[Any]:
    return [getattr(record, name) for name in record.__slots__]  # type: ignore[attr-defined]


def _hide_step(name: str, value: Any) -> object:
    if name == "paid":
        return {"event_id": value["event_id"], "payload": {"order": value["payload"]["order"]}}
    return {"token": "***"}


def _declare() -> Any:
    @job(
        tenant="none",
        idempotency_key=lambda i: f"{i.key}:{SECRET}",
        queue=QUEUE,
        redact=Redact(
            input=lambda i: {"key": i.key},
            key=lambda k: k.split(":", 1)[0] + ":***",
            steps=_hide_step,
        ),
    )
    async def vault(ctx: JobContext, input: Item) -> None:
        await ctx.step.run("mint", lambda: {"token": SECRET})
        await ctx.step.wait_for_event("paid", "vault.paid", match={"order": input.key})

    return vault


@pytest.mark.requires("events")
class TestRedactedRead:
    async def test_the_key_the_step_results_and_an_event_payload_go_through_redact(
        self, parity: ParityEnv
    ) -> None:
        """Rule: the key, each step result and a received event's payload are shown through
        the job's `redact` hooks; the secret in them is shown nowhere."""
        vault = _declare()
        async with parity.app([vault]) as app:
            result = await vault.enqueue(Item(key="o-1", org=SECRET))
            await app.run_worker(until_idle=True)
            await app.send_event("vault.paid", {"order": "o-1", "card": SECRET})
            await app.run_worker(until_idle=True)
            detail = await app.operator.get_job(result.job_id)
        assert detail.record.state == "completed"
        assert detail.redaction == "applied"
        assert detail.input == {"key": "o-1"}
        assert detail.record.idempotency_key == "o-1:***"
        shown = {s.name: json.loads(s.result or "null") for s in detail.steps}
        assert shown["mint"] == {"token": "***"}
        assert shown["paid"]["payload"] == {"order": "o-1"}
        assert SECRET not in _everything(detail)

    async def test_a_job_this_process_does_not_declare_is_withheld(self, parity: ParityEnv) -> None:
        """Rule: redaction fails closed: an operator whose app does not declare the job sees its
        input, key and step results withheld, with a marker saying why."""
        vault = _declare()
        async with parity.app([vault]) as app:
            result = await vault.enqueue(Item(key="o-1", org=SECRET))
            await app.run_worker(until_idle=True)
        async with parity.app() as bare:
            detail = await bare.operator.get_job(result.job_id)
        marker = "<withheld: this process declares no job named 'vault'>"
        assert detail.redaction == "unknown-job"
        assert detail.input == marker
        assert detail.record.idempotency_key == marker
        assert [json.loads(s.result or "null") for s in detail.steps] == [marker, marker]
        assert SECRET not in _everything(detail)


class TestRedactionFailure:
    async def test_a_hook_that_raises_withholds_its_value(self, parity: ParityEnv) -> None:
        """Rule: a redaction hook that raises withholds the value it was to show, never the raw one."""

        def broken(value: Any, *rest: Any) -> str:
            raise RuntimeError("redactor bug")

        @job(
            tenant="none",
            idempotency_key=key_of,
            queue=QUEUE,
            redact=Redact(input=broken, key=broken, steps=broken),
        )
        async def leaky(ctx: JobContext, input: Item) -> None:
            await ctx.step.run("mint", lambda: {"token": SECRET})

        async with parity.app([leaky]) as app:
            result = await leaky.enqueue(Item(key=SECRET))
            await app.run_worker(until_idle=True)
            detail = await app.operator.get_job(result.job_id)
        assert detail.input == "<withheld: redact.input of job 'leaky' raised or answered no JSON>"
        assert detail.record.idempotency_key.startswith("<withheld: redact.key of job 'leaky'")
        assert SECRET not in _everything(detail)
