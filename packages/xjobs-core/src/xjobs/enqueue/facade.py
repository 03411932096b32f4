"""The jobs facade: the one enqueue implementation every handle, app and relay goes through."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from datetime import timedelta
from typing import Any

from xjobs.actor import current_actor, traceparent_for_enqueue
from xjobs.clock import Clock
from xjobs.contract.driver import EnqueueResult, JobDriver, NewJob
from xjobs.contract.observer import NOOP, Observer
from xjobs.contract.results import ResultStore
from xjobs.contract.stores import OutboxStore
from xjobs.declare.job import MAX_PRIORITY, MIN_PRIORITY, EnqueueOptions, JobHandle
from xjobs.enqueue.derive import admission_keys, tenant_of
from xjobs.enqueue.flow import Flow, fold, resolve_flow
from xjobs.enqueue.result_wait import wait_for_result
from xjobs.enqueue.when import run_at_ms
from xjobs.errors import CapabilityMissingError, OptionInvalidError
from xjobs.ids import new_id_pair
from xjobs.options import finite_count
from xjobs.payload import encode_payload, validate_input


class JobsFacade:
    """Builds `NewJob` rows from inputs (validated, keyed, attributed, encoded once) and enqueues them."""

    def __init__(
        self,
        driver: JobDriver,
        clock: Clock,
        *,
        max_payload_bytes: int,
        outbox: OutboxStore | None = None,
        results: ResultStore | None = None,
        observer: Observer = NOOP,
    ) -> None:
        self._results = results
        self._observer = observer
        self._driver = driver
        self._clock = clock
        self._max_payload_bytes = max_payload_bytes
        self._outbox = outbox

    def build(
        self, handle: JobHandle[Any], inputs: Sequence[object], options: EnqueueOptions
    ) -> list[NewJob]:
        """The rows to enqueue, without touching the store (the outbox stages the same rows): each
        keyed on the job's own tenant, every input checked before any row is answered."""
        actor = current_actor()
        actor_org = actor.org_id if actor is not None else None
        enqueued_by = actor.id if actor is not None else None
        traceparent = traceparent_for_enqueue()
        run_at = run_at_ms(options, self._clock.now_ms())
        priority = handle.priority
        if options.priority is not None:
            priority = finite_count(
                "priority", options.priority, minimum=MIN_PRIORITY, maximum=MAX_PRIORITY
            )
        # what does not change per input, read once per call: this loop runs once per job
        name, queue, model = handle.name, handle.queue, handle.input_model
        attempts, dead_letter = handle.retry.attempts, handle.retry.dead_letter
        max_bytes = self._max_payload_bytes
        derived_later = admission_keys(handle)
        rows: list[NewJob] = []
        append = rows.append
        for raw in inputs:
            value = validate_input(model, raw, job=name)
            key = handle.key_for(value)
            tenant = tenant_of(handle, value, actor_org)
            for derive in derived_later:
                derive(value)  # refused here, with nothing written, rather than at admission
            job_id, run_id = new_id_pair()
            payload = encode_payload(value, job=name, max_bytes=max_bytes)
            # positional, in the record's field order
            append(
                NewJob(
                    job_id,
                    run_id,
                    name,
                    queue,
                    tenant,
                    key,
                    payload,
                    priority,
                    run_at,
                    attempts,
                    dead_letter,
                    enqueued_by,
                    traceparent,
                )
            )
        return rows

    async def enqueue_inputs(
        self, handle: JobHandle[Any], inputs: Sequence[object], options: EnqueueOptions
    ) -> list[EnqueueResult]:
        """Build the rows of one job per input and enqueue them in one driver call."""

        async def write() -> list[EnqueueResult]:
            flow = resolve_flow(options)  # refused before any row is built or written
            return await self._write(handle, self.build(handle, inputs, options), flow)

        return await self._sent(handle, len(inputs), write)

    async def enqueue_built(
        self, handle: JobHandle[Any], rows: Sequence[NewJob], options: EnqueueOptions
    ) -> list[EnqueueResult]:
        """Enqueue rows `build` made earlier (for a caller that hands out the job ids before the
        write, as Django's task result does), with the call's flow control and telemetry; a
        folded or deduplicated row answers the job it joined."""
        flow = resolve_flow(options)
        return await self._sent(handle, len(rows), lambda: self._write(handle, rows, flow))

    async def _sent(
        self,
        handle: JobHandle[Any],
        count: int,
        write: Callable[[], Awaitable[list[EnqueueResult]]],
    ) -> list[EnqueueResult]:
        """`write()` inside the observer's send span and counters (when it observes)."""
        if not self._observer.enabled:
            return await write()
        with self._observer.sending(handle.queue, handle.name, count) as sending:
            results = await write()
            sending.sent([r.job_id for r in results], sum(not r.deduped for r in results))
        return results

    async def _write(
        self, handle: JobHandle[Any], rows: Sequence[NewJob], flow: Flow | None
    ) -> list[EnqueueResult]:
        if not rows:
            return []
        if flow is None:
            answered = await self._driver.enqueue(rows)
        else:
            folded = fold(rows, flow)
            answered = folded.answers(await self._driver.enqueue(folded.rows))
        # rebuilt, not `dataclasses.replace`d: this runs once per enqueued job
        return [EnqueueResult(r.job_id, r.run_id, r.deduped, handle) for r in answered]

    async def result(self, handle: JobHandle[Any], job_id: str, within: timedelta | None) -> Any:
        """What a job of `handle` returned, waiting for it to settle (see `wait_for_result`)."""
        if self._results is None:
            raise CapabilityMissingError(
                "this backend stores no job results (it does not declare the results capability)"
            )
        return await wait_for_result(self._results, handle.fn, job_id, within)

    def stage_inputs(
        self,
        handle: JobHandle[Any],
        conn: object,
        inputs: Sequence[object],
        options: EnqueueOptions,
    ) -> list[EnqueueResult] | Awaitable[list[EnqueueResult]]:
        """Stage the rows `build` makes on the caller's connection, through the app's outbox."""
        outbox = self._staging_outbox(options)
        if self._observer.enabled:
            # a stage is a send not yet made: its span is the context the relay's job stamps
            with self._observer.sending(
                handle.queue, handle.name, len(inputs), operation="create"
            ) as sending:
                rows = self.build(handle, inputs, options)
                sending.sent([row.id for row in rows], 0)
            return outbox.stage_on(conn, rows)
        return outbox.stage_on(conn, self.build(handle, inputs, options))

    def stage_built(
        self,
        handle: JobHandle[Any],
        conn: object,
        rows: Sequence[NewJob],
        options: EnqueueOptions,
    ) -> list[EnqueueResult] | Awaitable[list[EnqueueResult]]:
        """Stage rows `build` made earlier on the caller's connection (a caller that hands out
        the job ids first, as Django's task result does), with a stage's telemetry."""
        outbox = self._staging_outbox(options)
        if self._observer.enabled:
            with self._observer.sending(
                handle.queue, handle.name, len(rows), operation="create"
            ) as sending:
                sending.sent([row.id for row in rows], 0)
        return outbox.stage_on(conn, rows)

    def _staging_outbox(self, options: EnqueueOptions) -> OutboxStore:
        """The outbox a stage writes to, refused when there is none or the call asks for flow
        control (which acts on enqueued jobs a staged row cannot see before its commit)."""
        if self._outbox is None:
            raise CapabilityMissingError(
                "this App has no outbox: its backend offers none; pass App(outbox='postgresql://…')"
            )
        if resolve_flow(options) is not None:
            raise OptionInvalidError(
                "debounce= and throttle= act on the jobs already enqueued, which a staged row "
                "cannot see before its transaction commits; enqueue instead of stage"
            )
        return self._outbox
