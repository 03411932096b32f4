"""Child jobs as durable steps (`ctx.step.invoke`, `map`, `spawn`): spawned in pages under the
parent's fence, the parent parked (no slot, no lease) until the children's own endings resolve it,
their results read back a page at a time."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from typing import Any

from xjobs.clock import Clock
from xjobs.codec import decode_result, return_annotation
from xjobs.contract.children import (
    MAX_CHILDREN_PAGE,
    MAX_SPAWN_PAGE,
    ChildGroup,
    ChildRow,
    ChildStore,
    GroupState,
)
from xjobs.contract.driver import WAIT_FOREVER_MS, Claim, Nack
from xjobs.contract.observer import NOOP, Observer
from xjobs.contract.stores import EventBus, StepRecord, StepStore
from xjobs.declare.job import JobHandle
from xjobs.errors import (
    CapabilityMissingError,
    ChildFailedError,
    ChildrenInvalidError,
    LeaseLostError,
)
from xjobs.run.child_rows import ChildRows, checked_count, checked_handle, child_id
from xjobs.run.signal import RunSignal
from xjobs.run.step_codec import encode_error
from xjobs.run.steps import StepApi, StepRun, StepSuspension

Park = Callable[[Claim, Nack], Awaitable[bool]]


class ChildSuspension(StepSuspension):
    """The run parks until the children of `step` resolve: `park(claim, nack)` is the store's
    atomic park (due at once when they resolved before it)."""

    def __init__(self, step: str, park: Park) -> None:
        super().__init__(step, WAIT_FOREVER_MS)
        self.park = park


class ChildSteps(StepApi):
    """`StepApi` with the steps that spawn child jobs. A child's id derives from the run, the step
    and its index, so a replay spawns nothing twice; the step records its shape (how many, which
    policy) and a replay with another shape is refused."""

    def __init__(
        self,
        run: StepRun,
        *,
        store: StepStore | None,
        events: EventBus | None,
        children: ChildStore | None,
        clock: Clock,
        signal: RunSignal,
        observer: Observer = NOOP,
    ) -> None:
        super().__init__(
            run, store=store, events=events, clock=clock, signal=signal, observer=observer
        )
        self._children = children

    async def invoke(self, name: str, handle: JobHandle[Any], input: object) -> Any:
        """Enqueue one child of `handle` with `input`, park until it ends, and answer its result
        (read through the child body's return annotation). A child that ends without one
        (dead-lettered, failed, cancelled) raises `ChildFailedError` (terminal) naming it."""
        (result,) = [r async for r in self._fan_in(name, handle, [input], fail_fast=True)]
        return result

    async def map(
        self,
        name: str,
        handle: JobHandle[Any],
        inputs: Iterable[object],
        *,
        return_exceptions: bool = False,
    ) -> list[Any]:
        """Enqueue one child of `handle` per input, park until they are resolved, and answer their
        results in input order.

        As with `asyncio.gather`: by default the first child to end without a result raises
        `ChildFailedError` naming it, and its siblings still pending are cancelled; with
        `return_exceptions=True` every child runs to its end and each failed one's
        `ChildFailedError` stands in its place.
        """
        fan_in = self._fan_in(name, handle, list(inputs), fail_fast=not return_exceptions)
        return [result async for result in fan_in]

    def map_iter(
        self,
        name: str,
        handle: JobHandle[Any],
        inputs: Iterable[object],
        *,
        return_exceptions: bool = False,
    ) -> AsyncIterator[Any]:
        """`map`, its results yielded in input order as they are read, a page at a time: the run
        holds one page of results, never the whole fan-out (`async for result in
        ctx.step.map_iter(...)`). The step starts when the iteration does."""
        return self._fan_in(name, handle, list(inputs), fail_fast=not return_exceptions)

    async def spawn(
        self, name: str, handle: JobHandle[Any], input: object, *, detached: bool = False
    ) -> str:
        """Enqueue one child the run does not wait for; answers its job id. It is cancelled with
        the parent unless `detached`."""
        position = self._claim_name(name)
        handle = checked_handle(handle, name)
        store = self._child_store()
        records = await self._hydrate()
        record = records.get(name)
        run = self._run
        if record is not None and record.status == "done" and record.result is not None:
            return str(json.loads(record.result)["job_id"])
        rows = ChildRows(handle, run.run_id, name, run.tenant)
        values = rows.check([input])
        group = ChildGroup(run.claim.job_id, run.run_id, run.queue, name, 1, False, False, detached)
        if await store.spawn(run.claim, group, 0, rows.page(values, 0)) is None:
            raise _lost(run, name)
        job_id = child_id(run.run_id, name, 0)
        await self._write(name, position, "done", json.dumps({"job_id": job_id}), None)
        return job_id

    # -- the machinery --------------------------------------------------------------------------

    async def _fan_in(
        self, name: str, handle: JobHandle[Any], inputs: list[object], *, fail_fast: bool
    ) -> AsyncIterator[Any]:
        position = self._claim_name(name)
        handle = checked_handle(handle, name)
        total = checked_count(len(inputs), name)
        store = self._child_store()
        records = await self._hydrate()
        record = records.get(name)
        shape = json.dumps({"children": total, "fail_fast": fail_fast})
        if record is not None and record.result is not None and record.result != shape:
            raise ChildrenInvalidError(
                f"step {name!r} recorded {record.result} on an earlier run of this job, and now "
                f"asks for {shape}: a step's children must be the same on every replay"
            )
        if record is not None and record.status == "done":
            if self._observer.enabled:
                self._observer.step_event("replay", name)
            async for result in self._results(store, name, handle, total, fail_fast, None):
                yield result
            return
        if total == 0:
            await self._write(name, position, "done", shape, None)
            return
        state = await self._spawned(store, name, handle, inputs, fail_fast, record, position)
        if not state.resolved:
            if self._observer.enabled:
                self._observer.step_event("wait", name)
            raise ChildSuspension(name, self._park(store, name))
        if fail_fast and state.failed and state.first_failed is not None:
            # read back, not taken from the counts: an operator may have requeued the child since
            # (it then ran to completion) and the parent after it
            index = state.first_failed
            page = await store.children_page(self._run.run_id, name, index - 1, 1)
            row = page[0] if page and page[0].index == index else None
            if row is None or row.state != "completed":
                raise await self._fail_fast(store, name, handle, position, index, row)
        async for result in self._results(store, name, handle, total, fail_fast, position):
            yield result
        await self._write(name, position, "done", shape, None)
        if self._observer.enabled:
            self._observer.fan_in(self._run.job, "completed")

    async def _spawned(
        self,
        store: ChildStore,
        name: str,
        handle: JobHandle[Any],
        inputs: list[object],
        fail_fast: bool,
        record: StepRecord | None,
        position: int,
    ) -> GroupState:
        """The group, its children written first where a page is missing (a first run, or a run
        cut short in the middle of its pages): every input is checked before the first write."""
        run = self._run
        state = await store.group(run.run_id, name)
        total = len(inputs)
        if state is not None and state.spawned >= total:
            return state
        rows = ChildRows(handle, run.run_id, name, run.tenant)
        values = rows.check(inputs)
        if record is None:
            shape = json.dumps({"children": total, "fail_fast": fail_fast})
            await self._write(name, position, "pending", shape, None)
        group = ChildGroup(run.claim.job_id, run.run_id, run.queue, name, total, True, fail_fast)
        start = 0 if state is None else state.spawned
        for first in range(start, total, MAX_SPAWN_PAGE):
            self._refuse_if_aborted(name)
            page = rows.page(values[first : first + MAX_SPAWN_PAGE], first)
            if await store.spawn(run.claim, group, first, page) is None:
                raise _lost(run, name)
        state = await store.group(run.run_id, name)
        assert state is not None, "a group is stored by its first page"
        return state

    def _park(self, store: ChildStore, name: str) -> Park:
        run_id = self._run.run_id

        def park(claim: Claim, nack: Nack) -> Awaitable[bool]:
            return store.park(claim, run_id, name, nack)

        return park

    async def _fail_fast(
        self,
        store: ChildStore,
        name: str,
        handle: JobHandle[Any],
        position: int,
        index: int,
        row: ChildRow | None,
    ) -> ChildFailedError:
        """The siblings of the failed child still pending are cancelled; the step records the
        failure and answers the error naming the child, for the caller to raise."""
        run = self._run
        if await store.cancel_children(run.claim, run.run_id, name) is None:
            raise _lost(run, name)
        error = _failure(name, handle, index, row)
        await self._write(name, position, "error", None, encode_error(error))
        if self._observer.enabled:
            self._observer.fan_in(run.job, "failed")
        return error

    async def _results(
        self,
        store: ChildStore,
        name: str,
        handle: JobHandle[Any],
        total: int,
        fail_fast: bool,
        position: int | None,
    ) -> AsyncIterator[Any]:
        """The children's results in index order; a child that ended without one is its
        `ChildFailedError` in its place, or, when the step fails fast, raised (its pending
        siblings cancelled and the failure recorded, unless the step was recorded already:
        `position=None`, a recorded step is never written again)."""
        annotation = return_annotation(handle.fn)
        async for index, row in self._rows(store, name, total):
            if row is not None and row.state == "completed":
                text = row.result
                yield None if text is None else decode_result(text, annotation, step=name)
            elif not fail_fast:
                yield _failure(name, handle, index, row)
            elif position is None:
                raise _failure(name, handle, index, row)
            else:
                raise await self._fail_fast(store, name, handle, position, index, row)

    async def _rows(
        self, store: ChildStore, name: str, total: int
    ) -> AsyncIterator[tuple[int, ChildRow | None]]:
        """Each child's row in index order, read a page at a time (`None`: the child was removed)."""
        after, index = -1, 0
        while index < total:
            page = await store.children_page(self._run.run_id, name, after, MAX_CHILDREN_PAGE)
            for row in page:
                while index < min(row.index, total):
                    yield index, None
                    index += 1
                if row.index == index:
                    yield index, row
                    index += 1
            if len(page) < MAX_CHILDREN_PAGE:
                break
            after = page[-1].index
        while index < total:
            yield index, None
            index += 1

    def _child_store(self) -> ChildStore:
        if self._children is None:
            raise CapabilityMissingError("this backend offers no child jobs ('children')")
        return self._children


def _failure(
    name: str, handle: JobHandle[Any], index: int, row: ChildRow | None
) -> ChildFailedError:
    """The error naming a child that ended without a result (`row=None`: it was removed)."""
    if row is None:
        return ChildFailedError(
            f"child {index} of step {name!r} (job {handle.name!r}) was removed before its "
            "parent read it",
            step=name,
            index=index,
            state="removed",
        )
    return ChildFailedError(
        f"child {index} of step {name!r} (job {handle.name!r}, id {row.job_id}) ended "
        f"{row.state}: {row.last_error or 'no error recorded'}",
        step=name,
        index=index,
        job_id=row.job_id,
        state=row.state,
        last_error=row.last_error,
    )


def _lost(run: StepRun, name: str) -> LeaseLostError:
    return LeaseLostError(
        f"the claim on job {run.claim.job_id} moved on; step {name!r} spawned nothing more"
    )
