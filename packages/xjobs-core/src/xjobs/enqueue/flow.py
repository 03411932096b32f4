"""Debounce and throttle on enqueue: the options checked once, and a batch folded to one row per key."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from xjobs.contract.driver import EnqueueResult, NewJob
from xjobs.errors import OptionInvalidError
from xjobs.options import duration_ms

if TYPE_CHECKING:
    from xjobs.declare.job import EnqueueOptions


@dataclass(frozen=True, slots=True)
class Flow:
    """The flow control of one enqueue call: exactly one of the two windows, in milliseconds."""

    debounce_ms: int | None
    throttle_ms: int | None


def resolve_flow(options: EnqueueOptions) -> Flow | None:
    """The call's `Flow` (`None` when it asks for none), or `OptionInvalidError` naming the clash."""
    if options.debounce is None and options.throttle is None:
        return None
    if options.debounce is not None and options.throttle is not None:
        raise OptionInvalidError("pass debounce= or throttle=, not both")
    if options.debounce is None:
        return Flow(None, duration_ms("throttle", options.throttle))
    if options.delay is not None or options.run_at is not None:
        raise OptionInvalidError(
            "debounce= decides when the job runs (the window after the last enqueue); "
            "pass it without delay= or run_at="
        )
    return Flow(duration_ms("debounce", options.debounce), None)


@dataclass(frozen=True, slots=True)
class Folded:
    """A batch with one row per namespace (`rows`), and per input the index of its row (`slots`)."""

    rows: list[NewJob]
    slots: list[int]

    def answers(self, answered: Sequence[EnqueueResult]) -> list[EnqueueResult]:
        """One result per input: the first input of a namespace takes its row's answer, the
        later ones the same job, `deduped=True` (their enqueue created nothing)."""
        seen: set[int] = set()
        out: list[EnqueueResult] = []
        for slot in self.slots:
            result = answered[slot]
            if slot in seen:
                result = EnqueueResult(result.job_id, result.run_id, deduped=True)
            seen.add(slot)
            out.append(result)
        return out


def fold(rows: Sequence[NewJob], flow: Flow) -> Folded:
    """Mark each row with the flow and apply a batch's inputs of one namespace in order, as that
    many enqueues would: under debounce the row keeps its first id and takes the LAST input
    (payload, enqueuer, trace); under throttle the first input is the one that runs."""
    sent: list[NewJob] = []
    where: dict[tuple[str, str, str], int] = {}
    slots: list[int] = []
    for row in rows:
        namespace = (row.name, row.tenant_id or "", row.idempotency_key)
        at = where.get(namespace)
        if at is None:
            where[namespace] = at = len(sent)
            sent.append(replace(row, debounce_ms=flow.debounce_ms, throttle_ms=flow.throttle_ms))
        elif flow.debounce_ms is not None:
            sent[at] = replace(
                sent[at],
                payload=row.payload,
                enqueued_by=row.enqueued_by,
                traceparent=row.traceparent,
            )
        slots.append(at)
    return Folded(sent, slots)
