"""`WorkerOptions`: every knob of a worker, each read by its own key and validated once."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TypedDict, Unpack

from xjobs.declare.rate import Rate, ResolvedRate, resolve_rates
from xjobs.errors import OptionInvalidError
from xjobs.names import validate_queue
from xjobs.options import duration_ms, finite_count
from xjobs.roles.idle_wait import CEILING_MS

MAX_CONCURRENCY = 10_000
MIN_LEASE_MS = 300
# A day bounds the lease (how long a dead worker's job waits to be reclaimed) and the drain (how
# long a SIGTERM may take): past it an engine's arithmetic, not the operator, would decide.
MAX_LEASE_MS = 86_400_000
MAX_DRAIN_TIMEOUT_MS = 86_400_000
DEFAULT_LEASE = timedelta(seconds=30)
DEFAULT_POLL_FLOOR = timedelta(milliseconds=50)
DEFAULT_DRAIN_TIMEOUT = timedelta(seconds=30)
DEFAULT_DRAIN_MARGIN = timedelta(seconds=1)


@dataclass(frozen=True, slots=True)
class WorkerOptions:
    """A worker's resolved options: per-queue slots, the process cap, lease and poll timings, the drain."""

    queues: tuple[str, ...]
    concurrency: Mapping[str, int]
    max_in_flight: int
    lease_ms: int
    heartbeat_ms: int
    presence_ttl_ms: int
    poll_floor_ms: int
    drain_timeout_ms: int
    drain_margin_ms: int
    threads: int
    # The worker's own rates, beside each job's: per queue it serves, and over all of them.
    queue_rates: Mapping[str, tuple[ResolvedRate, ...]] = field(default_factory=dict)
    global_rates: tuple[ResolvedRate, ...] = ()

    @property
    def slots(self) -> int:
        """How many jobs the worker may run at once: its queue slots, capped by `max_in_flight`."""
        return min(self.max_in_flight, sum(self.concurrency.values()))


class WorkerKwargs(TypedDict, total=False):
    """The knobs `App.worker` and `App.run_worker` pass through, each with its default below."""

    concurrency: int | Mapping[str, int]
    max_in_flight: int | None
    lease: timedelta
    heartbeat: timedelta | None
    poll_floor: timedelta
    drain_timeout: timedelta
    drain_margin: timedelta
    threads: int | None
    queue_rates: Mapping[str, Rate | Sequence[Rate]]
    global_rate: Rate | Sequence[Rate] | None


def resolve_worker_options(
    *, queues: Sequence[str], **knobs: Unpack[WorkerKwargs]
) -> WorkerOptions:
    """Validate each option under its own name; a bad one is `XJOBS_OPTION_INVALID` naming it.

    Defaults: 10 slots per queue, `max_in_flight` the sum of the slots, a 30 s lease renewed
    every third of it, a 50 ms poll floor, a 30 s drain with a 1 s margin, and as many threads
    for plain `def` bodies as the worker has slots. Bounds: a lease of 300 ms to a day, a drain
    and its margin of at most a day, a poll floor of 1 ms to the 2 s idle ceiling.
    """
    concurrency = knobs.get("concurrency", 10)
    max_in_flight = knobs.get("max_in_flight")
    lease = knobs.get("lease", DEFAULT_LEASE)
    heartbeat = knobs.get("heartbeat")
    poll_floor = knobs.get("poll_floor", DEFAULT_POLL_FLOOR)
    drain_timeout = knobs.get("drain_timeout", DEFAULT_DRAIN_TIMEOUT)
    drain_margin = knobs.get("drain_margin", DEFAULT_DRAIN_MARGIN)
    if isinstance(queues, str) or not queues:
        raise OptionInvalidError("queues must be a non-empty list of queue names")
    names = tuple(dict.fromkeys(validate_queue(q) for q in queues))
    if isinstance(concurrency, Mapping):
        unknown = sorted(set(concurrency) - set(names))
        if unknown:
            raise OptionInvalidError(
                f"concurrency names queues this worker does not serve: {unknown}"
            )
        per_queue = {
            q: finite_count(
                f"concurrency[{q!r}]", concurrency.get(q, 0), minimum=0, maximum=MAX_CONCURRENCY
            )
            for q in names
        }
    else:
        each = finite_count("concurrency", concurrency, minimum=0, maximum=MAX_CONCURRENCY)
        per_queue = dict.fromkeys(names, each)
    cap = sum(per_queue.values())
    if max_in_flight is not None:
        cap = finite_count("max_in_flight", max_in_flight, minimum=0, maximum=MAX_CONCURRENCY)
    lease_ms = _bounded_ms("lease", lease, MIN_LEASE_MS, MAX_LEASE_MS)
    heartbeat_ms = lease_ms // 3 if heartbeat is None else duration_ms("heartbeat", heartbeat)
    if heartbeat_ms * 3 > lease_ms:
        raise OptionInvalidError(
            f"heartbeat ({heartbeat_ms} ms) must be at most a third of the lease ({lease_ms} ms)"
        )
    threads = knobs.get("threads")
    thread_cap = max(min(cap, sum(per_queue.values())), 1)
    if threads is not None:
        thread_cap = finite_count("threads", threads, minimum=1, maximum=MAX_CONCURRENCY)
    drain_timeout_ms = _bounded_ms("drain_timeout", drain_timeout, 0, MAX_DRAIN_TIMEOUT_MS)
    drain_margin_ms = _bounded_ms("drain_margin", drain_margin, 0, MAX_DRAIN_TIMEOUT_MS)
    return WorkerOptions(
        queues=names,
        concurrency=per_queue,
        max_in_flight=cap,
        lease_ms=lease_ms,
        heartbeat_ms=heartbeat_ms,
        presence_ttl_ms=max(lease_ms, 60_000),
        # at most the idle ceiling: a pass that found work must never wait longer than an idle one
        poll_floor_ms=_bounded_ms("poll_floor", poll_floor, 1, CEILING_MS),
        drain_timeout_ms=drain_timeout_ms,
        # the margin is kept for settling before the deadline; it never eats more than half of it
        drain_margin_ms=min(drain_margin_ms, drain_timeout_ms // 2),
        threads=thread_cap,
        queue_rates=_queue_rates(knobs.get("queue_rates", {}), names),
        global_rates=resolve_rates(knobs.get("global_rate"), what="global_rate"),
    )


def _bounded_ms(name: str, value: object, least_ms: int, most_ms: int) -> int:
    """A duration as whole milliseconds inside `[least_ms, most_ms]`, refused naming `name` otherwise."""
    ms = duration_ms(name, value, allow_zero=least_ms == 0)
    if not least_ms <= ms <= most_ms:
        raise OptionInvalidError(
            f"{name} must be between {least_ms} ms and {most_ms} ms, got {value!r}"
        )
    return ms


def _queue_rates(
    declared: Mapping[str, Rate | Sequence[Rate]], names: tuple[str, ...]
) -> dict[str, tuple[ResolvedRate, ...]]:
    """`queue_rates` checked: each names a queue this worker serves."""
    if not isinstance(declared, Mapping):
        raise OptionInvalidError("queue_rates must map queue names to an xjobs.Rate")
    unknown = sorted(set(declared) - set(names))
    if unknown:
        raise OptionInvalidError(f"queue_rates names queues this worker does not serve: {unknown}")
    return {q: resolve_rates(r, what=f"queue_rates[{q!r}]") for q, r in declared.items()}
