"""`StepApi` (`ctx.step`): memoized `run`, durable `sleep`, and `wait_for_event`, replayed from one hydrate per run."""

from __future__ import annotations

import asyncio
import inspect
import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Final, TypeVar, overload

from xjobs.clock import Clock
from xjobs.codec import decode_result, encode_result, return_annotation
from xjobs.contract.driver import WAIT_FOREVER_MS, Claim
from xjobs.contract.observer import NOOP, Observer
from xjobs.contract.stores import EventBus, EventWait, StepRecord, StepStatus, StepStore
from xjobs.errors import (
    AbortedError,
    CapabilityMissingError,
    DrainingError,
    LeaseLostError,
    StepDuplicateError,
    StepInvalidError,
    StepTimeoutError,
)
from xjobs.event_match import encode_object, validate_event_name
from xjobs.options import duration_ms
from xjobs.run.signal import RunSignal
from xjobs.run.step_codec import encode_error, failed

T = TypeVar("T")

MAX_STEP_NAME_CHARS: Final = 200


class StepSuspension(BaseException):
    """Control flow, not a failure: the run parks until `resume_at_ms` (or until its event arrives).

    A `BaseException`, so a body's `except Exception` cannot swallow it.
    """

    def __init__(self, step: str, resume_at_ms: int, wait: EventWait | None = None) -> None:
        super().__init__(f"step {step!r} suspended the run until {resume_at_ms}")
        self.step = step
        self.resume_at_ms = resume_at_ms
        self.wait = wait


@dataclass(frozen=True, slots=True)
class StepRun:
    """Which run the steps belong to, the tenant its event waits are scoped to, what bounds it,
    and its job's name (the label of what its steps count)."""

    claim: Claim
    run_id: str
    queue: str
    step_timeout_ms: int | None
    tenant: str | None
    job: str = ""


class StepApi:
    """The run's steps. Names are unique within a run; a step's place in the call order is its position.

    A recorded error is replayed (raised again without calling the function) only when the run
    moved past it, i.e. a later step was recorded: the body's later choices then depended on it.
    Otherwise the step runs again on the next run of the job (a retry, or an operator's requeue).
    """

    def __init__(
        self,
        run: StepRun,
        *,
        store: StepStore | None,
        events: EventBus | None,
        clock: Clock,
        signal: RunSignal,
        observer: Observer = NOOP,
    ) -> None:
        self._observer = observer
        self._run = run
        self._store = store
        self._events = events
        self._clock = clock
        self._signal = signal
        self._names: dict[str, int] = {}
        self._records: dict[str, StepRecord] | None = None
        self._hydrating: asyncio.Task[dict[str, StepRecord]] | None = None

    # -- the steps ------------------------------------------------------------------------------

    @overload
    async def run(
        self, name: str, fn: Callable[..., Awaitable[T]], *args: Any, **kwargs: Any
    ) -> T: ...

    @overload
    async def run(self, name: str, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T: ...

    async def run(
        self, name: str, fn: Callable[..., Awaitable[T] | T], *args: Any, **kwargs: Any
    ) -> T:
        """Run `fn(*args, **kwargs)` once per run: its JSON result is stored before this returns, and
        a replay answers the stored result (through `fn`'s return annotation) without calling `fn`.

        An error `fn` raises is recorded and raised as `StepFailedError` (its `terminal` says whether
        retrying can help).
        """
        position = self._claim_name(name)
        records = await self._hydrate()
        annotation = return_annotation(fn)
        record = records.get(name)
        if record is not None and record.status == "done" and record.result is not None:
            value: T = decode_result(record.result, annotation, step=name)
            self._replayed(name)
            return value
        moved_past = record is not None and any(r.position > position for r in records.values())
        if (
            record is not None
            and record.status == "error"
            and record.error is not None
            and moved_past
        ):
            raise failed(name, record.error)
        try:
            if self._observer.enabled:
                with self._observer.step(name):
                    result = await self._call(name, fn, args, kwargs)
            else:
                result = await self._call(name, fn, args, kwargs)
        except Exception as exc:
            text = encode_error(exc)
            await self._write(name, position, "error", None, text)
            raise failed(name, text) from exc
        stored = encode_result(result, step=name)
        value = decode_result(stored, annotation, step=name)
        await self._write(name, position, "done", stored, None)
        return value

    async def sleep(self, name: str, duration: timedelta | float) -> None:
        """Suspend the run for `duration` (a `timedelta` or seconds); the wake time is recorded once."""
        ms = duration_ms(f"step {name!r} duration", duration, allow_zero=True)
        await self._sleep(name, lambda: self._clock.now_ms() + ms)

    async def sleep_until(self, name: str, when: datetime) -> None:
        """Suspend the run until `when` (a timezone-aware datetime)."""
        if not isinstance(when, datetime) or when.tzinfo is None:
            raise StepInvalidError(f"step {name!r} needs a timezone-aware datetime, got {when!r}")
        wake_at = round(when.timestamp() * 1000)
        await self._sleep(name, lambda: wake_at)

    async def wait_for_event(
        self,
        name: str,
        event: str,
        *,
        match: Mapping[str, Any] | None = None,
        timeout: timedelta | float | None = None,  # noqa: ASYNC109 - a durable wait's bound, not a call's
    ) -> Any:
        """The payload of the first `event` sent in the run's tenant (`ctx.tenant`; the untenanted
        scope for a `tenant="none"` job) after this wait began whose payload `match`es (each key
        present with an equal value), or `None` once `timeout` passed on the bus's clock.

        The run parks meanwhile; an event sent between its last look and the park still wakes it.
        """
        position = self._claim_name(name)
        event = validate_event_name(event)
        match_text = encode_object(match or {}, what=f"match of step {name!r}")
        timeout_ms = None if timeout is None else duration_ms(f"step {name!r} timeout", timeout)
        bus = self._bus()
        records = await self._hydrate()
        record = records.get(name)
        if record is not None and record.status == "done" and record.result is not None:
            self._replayed(name)
            return json.loads(record.result)["payload"]
        if record is None or record.result is None:
            since = await bus.now()
            deadline = None if timeout_ms is None else since + timeout_ms
            wait = self._wait(name, event, match_text, since, deadline)
            await self._write(name, position, "pending", _wait_state(wait), None)
            timed_out = False
        else:
            state = json.loads(record.result)
            wait = self._wait(
                name,
                str(state["event"]),
                str(state["match"]),
                int(state["since_ms"]),
                state["deadline_ms"],
            )
            timed_out = wait.deadline_ms is not None and await bus.now() >= wait.deadline_ms
        found = await bus.find(wait.event, wait.match, wait.since_ms, tenant=wait.tenant)
        if found is not None or timed_out:
            payload = None if found is None else json.loads(found.payload)
            outcome = {"event_id": None if found is None else found.id, "payload": payload}
            await self._write(name, position, "done", json.dumps(outcome), None)
            return payload
        resume_at = WAIT_FOREVER_MS if wait.deadline_ms is None else wait.deadline_ms
        if self._observer.enabled:
            self._observer.step_event("wait", name)
        raise StepSuspension(name, resume_at, wait)

    # -- the machinery --------------------------------------------------------------------------

    def _wait(
        self, step: str, event: str, match: str, since_ms: int, deadline_ms: int | None
    ) -> EventWait:
        run = self._run
        return EventWait(
            run.claim.job_id,
            run.run_id,
            run.queue,
            step,
            event,
            match,
            since_ms,
            deadline_ms,
            run.tenant,
        )

    async def _sleep(self, name: str, wake_at: Callable[[], int]) -> None:
        position = self._claim_name(name)
        records = await self._hydrate()
        record = records.get(name)
        if record is not None and record.status == "done" and record.result is not None:
            at = int(json.loads(record.result)["wake_at_ms"])
            self._replayed(name)
        else:
            at = wake_at()
            await self._write(name, position, "done", json.dumps({"wake_at_ms": at}), None)
        if self._clock.now_ms() < at:
            if self._observer.enabled:
                self._observer.step_event("sleep", name)
            raise StepSuspension(name, at)

    def _replayed(self, name: str) -> None:
        """A step answered from its record (a `run`, a `sleep` or a `wait_for_event` alike) is traced."""
        if self._observer.enabled:
            self._observer.step_event("replay", name)

    def _claim_name(self, name: object) -> int:
        """Take `name` for this run (synchronously, so steps started together keep their call order).

        An aborted run starts no step (a drained one still may: its writes are fenced).
        """
        self._refuse_if_aborted(name)
        if (
            not isinstance(name, str)
            or not name
            or len(name) > MAX_STEP_NAME_CHARS
            or "\x00" in name
        ):
            raise StepInvalidError(
                f"a step name must be a non-empty string of at most {MAX_STEP_NAME_CHARS} "
                f"characters without NUL, got {name!r}"
            )
        if name in self._names:
            raise StepDuplicateError(f"step name {name!r} is used twice in run {self._run.run_id}")
        position = self._names[name] = len(self._names)
        return position

    def _refuse_if_aborted(self, name: object) -> None:
        reason = self._signal.reason
        if reason is not None and not isinstance(reason, DrainingError):
            raise AbortedError(
                f"the run was aborted ({reason.code}); step {name!r} is not recorded"
            )

    def _steps(self) -> StepStore:
        if self._store is None:
            raise CapabilityMissingError("this backend offers no step store ('steps')")
        return self._store

    def _bus(self) -> EventBus:
        if self._events is None:
            raise CapabilityMissingError("this backend offers no event bus ('events')")
        return self._events

    async def _hydrate(self) -> dict[str, StepRecord]:
        """The run's records, read with ONE `list` however many steps start at once."""
        if self._records is not None:
            return self._records
        if self._hydrating is None:
            store = self._steps()

            async def load() -> dict[str, StepRecord]:
                rows = await store.list(self._run.run_id, self._run.queue)
                return {r.name: r for r in rows}

            self._hydrating = asyncio.ensure_future(load())
        records = await asyncio.shield(self._hydrating)
        self._records = records
        return records

    async def _call(
        self, name: str, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        limit = self._run.step_timeout_ms
        if limit is None:
            return await _invoke(fn, args, kwargs)
        deadline = asyncio.timeout(limit / 1000)
        try:
            async with deadline:
                return await _invoke(fn, args, kwargs)
        except TimeoutError:
            if not deadline.expired():
                raise
        # The deadline cancelled the step; now the attempt fails (the body cannot catch its way on).
        error = StepTimeoutError(f"step {name!r} ran past its step_timeout of {limit} ms")
        self._signal.abort(error)
        raise error

    async def _write(
        self, name: str, position: int, status: StepStatus, result: str | None, error: str | None
    ) -> None:
        """Record a step, fenced on the claim; an aborted run writes nothing but a step in the drain."""
        reason = self._signal.reason
        if reason is not None and not isinstance(reason, DrainingError):
            raise AbortedError(
                f"the run was aborted ({reason.code}); step {name!r} is not recorded"
            )
        record = StepRecord(
            run_id=self._run.run_id,
            name=name,
            status=status,
            result=result,
            error=error,
            position=position,
            created_at_ms=self._clock.now_ms(),
        )
        if not await asyncio.shield(self._steps().put(self._run.claim, record)):
            raise LeaseLostError(
                f"the claim on job {self._run.claim.job_id} moved on; step {name!r} is not recorded"
            )
        assert self._records is not None
        self._records[name] = record


def _wait_state(wait: EventWait) -> str:
    """What a pending wait records, so that every replay waits for the same thing since the same time."""
    state = {
        "event": wait.event,
        "match": wait.match,
        "since_ms": wait.since_ms,
        "deadline_ms": wait.deadline_ms,
    }
    return json.dumps(state)


async def _invoke(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    result = fn(*args, **kwargs)
    if inspect.isawaitable(result):
        return await result
    return result
