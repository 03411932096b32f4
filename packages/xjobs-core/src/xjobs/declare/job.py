"""The `job()` primitive: a declaration validated once, and the immutable `JobHandle` it builds."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeAlias, TypeVar, overload

from pydantic import BaseModel

from xjobs.declare.concurrency import Concurrency, ResolvedConcurrency, resolve_concurrency
from xjobs.declare.keys import derive_str
from xjobs.declare.rate import Rate, ResolvedRate, resolve_rates
from xjobs.declare.retry import Retry
from xjobs.declare.tenant import JobTenant, resolve_tenant
from xjobs.errors import (
    AppStateError,
    DeclarationInvalidError,
    IdempotencyKeyRequiredError,
    JobDuplicateError,
)
from xjobs.names import DEFAULT_QUEUE, validate_job_name, validate_queue
from xjobs.options import finite_count, optional_duration_ms

if TYPE_CHECKING:
    import asyncpg
    import psycopg

    from xjobs.contract.driver import EnqueueResult
    from xjobs.memory.outbox import MemoryTransaction

    SyncConnection: TypeAlias = psycopg.Connection[Any] | MemoryTransaction
    AsyncConnection: TypeAlias = psycopg.AsyncConnection[Any] | asyncpg.Connection

I = TypeVar("I", bound=BaseModel)  # noqa: E741 - the input model, as in the public signatures
MIN_PRIORITY = 0
MAX_PRIORITY = 9

# What a body returns is stored with its completion, up to this many bytes of JSON (settable per job).
DEFAULT_MAX_RESULT_BYTES = 1_048_576
MAX_RESULT_BYTES = 64 * 1_048_576
# A body's first parameter is the run's context: `JobContext` for an `async def` body,
# `SyncJobContext` for a plain `def` body (on a thread of its own, no durable steps). Both live in
# run/context, a layer above the declarations, so a declaration leaves that parameter unchecked.
Body = Callable[[Any, I], Awaitable[object]]
SyncBody = Callable[[Any, I], object]


@dataclass(frozen=True, slots=True)
class Redact(Generic[I]):
    """The hooks an operator reads a job through.

    - `input(model) -> JSON-able`: the input as shown (a pydantic model or plain JSON data).
    - `key(key) -> str`: the idempotency key as shown.
    - `steps(name, value) -> JSON-able`: a step's stored result as shown. A `wait_for_event`
      step's value is `{"event_id": ..., "payload": <the event's payload>}` (or, while it waits,
      `{"event": ..., "match": ..., ...}`), so this hook is also where event payloads are redacted.

    A hook that raises, or answers something that is not JSON, withholds the value.
    """

    input: Callable[[I], object] | None = None
    key: Callable[[str], str] | None = None
    steps: Callable[[str, Any], object] | None = None

    @property
    def declared(self) -> bool:
        """Whether any hook is declared."""
        return self.input is not None or self.key is not None or self.steps is not None


NO_REDACTION: Redact[Any] = Redact()


def resolve_redact(redact: object, redact_input: object, *, job: str) -> Redact[Any]:
    """One `Redact` from `redact=` or the older `redact_input=` (the same as `Redact(input=...)`)."""
    if redact is not None and redact_input is not None:
        raise DeclarationInvalidError(
            f"job {job!r} declares both redact= and redact_input=; "
            "pass Redact(input=..., key=..., steps=...) alone"
        )
    if redact_input is not None:
        redact = Redact(input=redact_input)  # type: ignore[arg-type]
    if redact is None:
        return NO_REDACTION
    if not isinstance(redact, Redact):
        raise DeclarationInvalidError(f"redact of job {job!r} must be an xjobs Redact(...)")
    for hook in ("input", "key", "steps"):
        if getattr(redact, hook) is not None and not callable(getattr(redact, hook)):
            name = "redact_input" if redact_input is not None else f"redact.{hook}"
            raise DeclarationInvalidError(f"{name} of job {job!r} must be a callable")
    return redact


@dataclass(frozen=True, slots=True)
class EnqueueOptions:
    """Per-call overrides of one enqueue: when it may run, at which priority, and its flow control
    on the idempotency namespace (`debounce` or `throttle`, docs/flow-control.md)."""

    delay: timedelta | None = None
    run_at: datetime | None = None
    priority: int | None = None
    debounce: timedelta | None = None
    throttle: timedelta | None = None


class Enqueuer(Protocol):
    """What a handle enqueues through: the jobs facade of the app that registered it."""

    async def enqueue_inputs(
        self, handle: JobHandle[Any], inputs: Sequence[object], options: EnqueueOptions
    ) -> list[EnqueueResult]:
        """Enqueue one job of `handle` per input; each answers its ids and whether it deduped."""
        ...

    def stage_inputs(
        self,
        handle: JobHandle[Any],
        conn: object,
        inputs: Sequence[object],
        options: EnqueueOptions,
    ) -> list[EnqueueResult] | Awaitable[list[EnqueueResult]]:
        """Stage one job of `handle` per input in the outbox, in the caller's transaction `conn`."""
        ...

    async def result(self, handle: JobHandle[Any], job_id: str, within: timedelta | None) -> Any:
        """What a job of `handle` returned, waiting up to `within` for it to settle."""
        ...


class JobHandle(Generic[I]):
    """One declared job. Immutable after declaration, except the name its registration stamps once."""

    __slots__ = (
        "_built",
        "_enqueuer",
        "_name",
        "concurrency",
        "declared_name",
        "event_poll_ms",
        "fn",
        "idempotency_key",
        "input_model",
        "on_settled",
        "priority",
        "queue",
        "rates",
        "redact",
        "result_max_bytes",
        "retention_ms",
        "retry",
        "step_timeout_ms",
        "sync",
        "tenant",
        "timeout_ms",
    )

    def __init__(
        self,
        *,
        fn: Body[I] | SyncBody[I],
        input_model: type[I],
        tenant: JobTenant,
        idempotency_key: Callable[[I], str],
        queue: str,
        priority: int,
        retry: Retry,
        timeout_ms: int | None,
        step_timeout_ms: int | None,
        event_poll_ms: int | None,
        concurrency: ResolvedConcurrency | None,
        declared_name: str | None,
        redact: Redact[I],
        on_settled: Callable[..., Awaitable[None]] | None,
        result_max_bytes: int = DEFAULT_MAX_RESULT_BYTES,
        retention_ms: int | None = None,
        rates: tuple[ResolvedRate, ...] = (),
    ) -> None:
        self.fn = fn
        # The rates a run takes a permit of before it starts (`rate=`), every one applying.
        self.rates = rates
        # How long a finished job of this name is kept (`None`: the app's policy for its state).
        self.retention_ms = retention_ms
        self.sync = not inspect.iscoroutinefunction(fn)
        self.result_max_bytes = result_max_bytes
        self.input_model = input_model
        self.tenant = tenant
        self.idempotency_key = idempotency_key
        self.queue = queue
        self.priority = priority
        self.retry = retry
        self.timeout_ms = timeout_ms
        self.step_timeout_ms = step_timeout_ms
        self.event_poll_ms = event_poll_ms
        self.concurrency = concurrency
        self.declared_name = declared_name
        # What an operator is shown of the input, the key and the step results.
        self.redact = redact
        self.on_settled = on_settled
        self._name: str | None = declared_name
        self._enqueuer: Enqueuer | None = None
        # Set by `job()` once its checks passed: registration refuses a handle built by hand.
        self._built = False

    @property
    def name(self) -> str:
        """The durable name: `name=` if declared, else the attribute its module exports it under."""
        return self._name if self._name is not None else getattr(self.fn, "__name__", "job")

    @property
    def redact_input(self) -> Callable[[I], object] | None:
        """The input's redaction hook (`redact.input`; `redact_input=` declares it alone)."""
        return self.redact.input

    @property
    def built(self) -> bool:
        """Whether `job()` built this handle (every declaration check ran on it)."""
        return self._built

    @property
    def stamped(self) -> bool:
        """Whether the handle has its durable name (declared, or stamped by its registration)."""
        return self._name is not None

    def stamp(self, name: str) -> None:
        """Give the handle its registered name, once; a second, different name is a duplicate."""
        validate_job_name(name)
        if self._name is None:
            self._name = name
        elif self._name != name:
            raise JobDuplicateError(
                f"one job handle is registered as both {self._name!r} and {name!r}; "
                "give each job one export name (or declare name=)"
            )

    def bind(self, enqueuer: Enqueuer | None) -> None:
        """Route `enqueue` through `enqueuer` (the app that opened last), or unbind with `None`."""
        self._enqueuer = enqueuer

    def bound_to(self, enqueuer: Enqueuer) -> bool:
        """Whether `enqueue` on this handle goes through `enqueuer` (the app that opened last)."""
        return self._enqueuer is enqueuer

    def key_for(self, value: I) -> str:
        """The idempotency key this input derives."""
        return derive_str(self.idempotency_key, value, what="idempotency key", job=self.name)

    def tenant_for(self, value: I) -> str | None:
        """The org a run of this input acts for (`None` for `tenant="none"`)."""
        return self.tenant.org_for(value, job=self.name)

    def _require_enqueuer(self) -> Enqueuer:
        if self._enqueuer is None:
            raise AppStateError(
                f"job {self.name!r} is not registered with an open App; pass it in App(jobs=[...]) "
                "and enter `async with app:` before enqueueing"
            )
        return self._enqueuer

    async def enqueue(
        self,
        input: I | dict[str, Any],
        *,
        delay: timedelta | None = None,
        run_at: datetime | None = None,
        priority: int | None = None,
        debounce: timedelta | None = None,
        throttle: timedelta | None = None,
    ) -> EnqueueResult:
        """Validate `input`, derive its key and tenant, and enqueue one job.

        `debounce=`: a not-yet-claimed job of the same key takes this input and runs `debounce`
        after the last such enqueue. `throttle=`: at most one job of the key per `throttle`, the
        rest answer it (`deduped=True`). See docs/flow-control.md.
        """
        options = EnqueueOptions(
            delay=delay, run_at=run_at, priority=priority, debounce=debounce, throttle=throttle
        )
        (result,) = await self._require_enqueuer().enqueue_inputs(self, [input], options)
        return result

    async def result(self, job_id: str, *, timeout: timedelta | None = None) -> Any:  # noqa: ASYNC109 - the public API
        """What job `job_id`'s body returned, waiting up to `timeout` (default 30 s) for it to settle.

        The value is decoded through the body's return annotation (a pydantic model again). A job
        that died raises `JobFailedError`, a cancelled one `JobCancelledError`, no answer in
        time `ResultTimeoutError` (a `TimeoutError`), an unknown id `JobNotFoundError`.
        """
        return await self._require_enqueuer().result(self, job_id, timeout)

    async def enqueue_many(
        self,
        inputs: Sequence[I | dict[str, Any]],
        *,
        delay: timedelta | None = None,
        run_at: datetime | None = None,
        priority: int | None = None,
        debounce: timedelta | None = None,
        throttle: timedelta | None = None,
    ) -> list[EnqueueResult]:
        """Enqueue many inputs in one round trip; answers one result per input, in order.

        With `debounce=` or `throttle=`, inputs of one key apply in order, as that many enqueues.
        """
        options = EnqueueOptions(
            delay=delay, run_at=run_at, priority=priority, debounce=debounce, throttle=throttle
        )
        return await self._require_enqueuer().enqueue_inputs(self, list(inputs), options)

    @overload
    def stage(
        self,
        conn: SyncConnection,
        input: I | dict[str, Any],
        *,
        delay: timedelta | None = None,
        run_at: datetime | None = None,
        priority: int | None = None,
    ) -> EnqueueResult: ...

    @overload
    def stage(
        self,
        conn: AsyncConnection,
        input: I | dict[str, Any],
        *,
        delay: timedelta | None = None,
        run_at: datetime | None = None,
        priority: int | None = None,
    ) -> Awaitable[EnqueueResult]: ...

    def stage(
        self,
        conn: object,
        input: I | dict[str, Any],
        *,
        delay: timedelta | None = None,
        run_at: datetime | None = None,
        priority: int | None = None,
    ) -> EnqueueResult | Awaitable[EnqueueResult]:
        """Stage one job in the outbox on `conn`, the caller's own connection, inside its
        transaction: it is enqueued by the relay once that transaction commits, and never if it
        rolls back. Validated, keyed and attributed exactly as `enqueue`; the answer carries the
        job's real ids. A sync connection (psycopg `Connection`) answers at once; an async one
        (psycopg `AsyncConnection`, asyncpg `Connection`) answers an awaitable."""
        options = EnqueueOptions(delay=delay, run_at=run_at, priority=priority)
        staged = self._require_enqueuer().stage_inputs(self, conn, [input], options)
        if isinstance(staged, list):
            (result,) = staged
            return result
        return _only(staged)

    @overload
    def stage_many(
        self,
        conn: SyncConnection,
        inputs: Sequence[I | dict[str, Any]],
        *,
        delay: timedelta | None = None,
        run_at: datetime | None = None,
        priority: int | None = None,
    ) -> list[EnqueueResult]: ...

    @overload
    def stage_many(
        self,
        conn: AsyncConnection,
        inputs: Sequence[I | dict[str, Any]],
        *,
        delay: timedelta | None = None,
        run_at: datetime | None = None,
        priority: int | None = None,
    ) -> Awaitable[list[EnqueueResult]]: ...

    def stage_many(
        self,
        conn: object,
        inputs: Sequence[I | dict[str, Any]],
        *,
        delay: timedelta | None = None,
        run_at: datetime | None = None,
        priority: int | None = None,
    ) -> list[EnqueueResult] | Awaitable[list[EnqueueResult]]:
        """Stage many jobs on `conn` in one statement; one result per input, in order."""
        options = EnqueueOptions(delay=delay, run_at=run_at, priority=priority)
        return self._require_enqueuer().stage_inputs(self, conn, list(inputs), options)

    def __repr__(self) -> str:
        return f"<JobHandle {self.name} queue={self.queue}>"


async def _only(staged: Awaitable[list[EnqueueResult]]) -> EnqueueResult:
    (result,) = await staged
    return result


def _check_signature(fn: Callable[..., object]) -> list[inspect.Parameter]:
    params = list(inspect.signature(fn).parameters.values())
    if len(params) != 2:
        raise DeclarationInvalidError(
            f"job body {_label(fn)} must take (ctx, input); it takes {len(params)} parameters"
        )
    return params


def _label(fn: object) -> str:
    return str(getattr(fn, "__qualname__", None) or repr(fn))


def _input_model_of(fn: Callable[..., object], param: inspect.Parameter) -> type[BaseModel]:
    """The pydantic model annotating the input parameter; only that annotation is resolved."""
    annotation = param.annotation
    if isinstance(annotation, str):
        namespace = getattr(inspect.unwrap(fn), "__globals__", {})
        try:
            annotation = eval(
                annotation, namespace
            )  # what typing.get_type_hints does, for one name
        except Exception as exc:
            raise DeclarationInvalidError(
                f"job body {_label(fn)}: the input annotation {param.annotation!r} does not resolve "
                f"({exc!r}); import the model at module level or pass input_model="
            ) from exc
    if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
        raise DeclarationInvalidError(
            f"job body {_label(fn)}: annotate its input parameter with a pydantic model, "
            "or pass input_model="
        )
    return annotation


def _build(fn: Callable[..., object], options: dict[str, Any]) -> JobHandle[Any]:
    if not callable(fn) or inspect.isasyncgenfunction(fn) or inspect.isgeneratorfunction(fn):
        raise DeclarationInvalidError(
            f"job body {_label(fn)} must be a function: `async def` (with durable steps) or `def`"
        )
    if not inspect.iscoroutinefunction(fn):
        for option in ("step_timeout", "event_poll"):
            if options[option] is not None:
                raise DeclarationInvalidError(
                    f"{option} of job {_label(fn)} applies to durable steps, which need an "
                    "`async def` body; a plain `def` body has none"
                )
    params = _check_signature(fn)
    declared_name = options["name"]
    if declared_name is not None:
        validate_job_name(declared_name)
    label = declared_name or getattr(fn, "__name__", "job")
    tenant = resolve_tenant(options["tenant"], job=label)
    key = options["idempotency_key"]
    if not callable(key):
        raise IdempotencyKeyRequiredError(
            f"job {label!r} must declare idempotency_key= as a callable (input -> str)"
        )
    model = options["input_model"]
    if model is None:
        model = _input_model_of(fn, params[1])
    elif not (isinstance(model, type) and issubclass(model, BaseModel)):
        raise DeclarationInvalidError(
            f"input_model of job {label!r} must be a pydantic model class"
        )
    retry = options["retry"]
    if not isinstance(retry, Retry):
        raise DeclarationInvalidError(f"retry of job {label!r} must be an xjobs.Retry")
    if options["on_settled"] is not None and not callable(options["on_settled"]):
        raise DeclarationInvalidError(f"on_settled of job {label!r} must be a callable")
    redact = resolve_redact(options["redact"], options["redact_input"], job=label)
    handle: JobHandle[Any] = JobHandle(
        fn=fn,
        input_model=model,
        tenant=tenant,
        idempotency_key=key,
        queue=validate_queue(options["queue"]),
        priority=finite_count(
            "priority", options["priority"], minimum=MIN_PRIORITY, maximum=MAX_PRIORITY
        ),
        retry=retry,
        timeout_ms=optional_duration_ms("timeout", options["timeout"]),
        step_timeout_ms=optional_duration_ms("step_timeout", options["step_timeout"]),
        event_poll_ms=optional_duration_ms("event_poll", options["event_poll"]),
        concurrency=resolve_concurrency(options["concurrency"], job=label),
        declared_name=declared_name,
        redact=redact,
        on_settled=options["on_settled"],
        result_max_bytes=finite_count(
            "result_max_bytes", options["result_max_bytes"], minimum=1, maximum=MAX_RESULT_BYTES
        ),
        retention_ms=optional_duration_ms("retention", options["retention"]),
        rates=resolve_rates(options["rate"], what=f"rate of job {label!r}"),
    )
    handle._built = True
    return handle


@overload
def job(
    fn: Body[I] | SyncBody[I],
    *,
    tenant: Callable[[I], str] | str | None = ...,
    idempotency_key: Callable[[I], str] | None = ...,
    queue: str = ...,
    priority: int = ...,
    retry: Retry = ...,
    timeout: timedelta | None = ...,
    step_timeout: timedelta | None = ...,
    event_poll: timedelta | None = ...,
    concurrency: int | Concurrency | None = ...,
    rate: Rate | Sequence[Rate] | None = ...,
    name: str | None = ...,
    input_model: type[I] | None = ...,
    redact: Redact[I] | None = ...,
    redact_input: Callable[[I], object] | None = ...,
    on_settled: Callable[..., Awaitable[None]] | None = ...,
    result_max_bytes: int = ...,
    retention: timedelta | None = ...,
) -> JobHandle[I]: ...


@overload
def job(
    fn: None = None,
    *,
    tenant: Callable[[Any], str] | str | None = ...,
    idempotency_key: Callable[[Any], str] | None = ...,
    queue: str = ...,
    priority: int = ...,
    retry: Retry = ...,
    timeout: timedelta | None = ...,
    step_timeout: timedelta | None = ...,
    event_poll: timedelta | None = ...,
    concurrency: int | Concurrency | None = ...,
    rate: Rate | Sequence[Rate] | None = ...,
    name: str | None = ...,
    input_model: type[BaseModel] | None = ...,
    redact: Redact[Any] | None = ...,
    redact_input: Callable[[Any], object] | None = ...,
    on_settled: Callable[..., Awaitable[None]] | None = ...,
    result_max_bytes: int = ...,
    retention: timedelta | None = ...,
) -> Callable[[Body[Any] | SyncBody[Any]], JobHandle[Any]]: ...


def job(
    fn: Body[Any] | SyncBody[Any] | None = None,
    *,
    tenant: Callable[[Any], str] | str | None = None,
    idempotency_key: Callable[[Any], str] | None = None,
    queue: str = DEFAULT_QUEUE,
    priority: int = 0,
    retry: Retry | None = None,
    timeout: timedelta | None = None,
    step_timeout: timedelta | None = None,
    event_poll: timedelta | None = None,
    concurrency: int | Concurrency | None = None,
    rate: Rate | Sequence[Rate] | None = None,
    name: str | None = None,
    input_model: type[BaseModel] | None = None,
    redact: Redact[Any] | None = None,
    redact_input: Callable[[Any], object] | None = None,
    on_settled: Callable[..., Awaitable[None]] | None = None,
    result_max_bytes: int = DEFAULT_MAX_RESULT_BYTES,
    retention: timedelta | None = None,
) -> JobHandle[Any] | Callable[[Body[Any] | SyncBody[Any]], JobHandle[Any]]:
    """Declare a job: `@job(tenant=..., idempotency_key=...)` over `async def body(ctx, input: Model)`
    (durable steps, the event loop) or a plain `def body(ctx, input: Model)` (run on a thread).

    Every option is validated here, once; a bad one raises an `XJobsError` naming it.
    `retention` keeps a finished job of this name that long in every finished state, instead of
    the app's `Retention` policy. `redact=Redact(input=..., key=..., steps=...)` is what an
    operator is shown of the input, the idempotency key and the step results (`redact_input=f` is
    `Redact(input=f)`).
    """
    options: dict[str, Any] = {
        "tenant": tenant,
        "idempotency_key": idempotency_key,
        "queue": queue,
        "priority": priority,
        "retry": retry if retry is not None else Retry(),
        "timeout": timeout,
        "step_timeout": step_timeout,
        "event_poll": event_poll,
        "concurrency": concurrency,
        "rate": rate,
        "name": name,
        "input_model": input_model,
        "redact": redact,
        "redact_input": redact_input,
        "on_settled": on_settled,
        "result_max_bytes": result_max_bytes,
        "retention": retention,
    }
    if fn is not None:
        return _build(fn, options)

    def decorate(body: Body[Any] | SyncBody[Any]) -> JobHandle[Any]:
        return _build(body, options)

    return decorate
