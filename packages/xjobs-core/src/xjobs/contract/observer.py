"""`Observer`: the one instrumentation seam the enqueue path, the run, the settle room, steps and the roles call.

Every call site checks `observer.enabled` first, so the default `NOOP` costs one attribute read.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import Final, Protocol

from xjobs.contract.driver import ClaimedJob, NewJob, Outcome


class Sending(Protocol):
    """One send in flight (an enqueue, a stage, a cron fire): told what the store answered."""

    def sent(self, job_ids: Sequence[str], fresh: int) -> None:
        """The ids the store answered and how many were new (not deduped)."""
        ...


class Observer(Protocol):
    """What the job system tells its telemetry. Call sites guard every call with `enabled`."""

    @property
    def enabled(self) -> bool:
        """Whether anything listens; when false no other member is called."""
        ...

    def sending(
        self, queue: str, job: str, count: int, *, operation: str = "send"
    ) -> AbstractContextManager[Sending]:
        """Around building and storing `count` jobs of `job` (its context is what they stamp)."""
        ...

    def enqueued(self, queue: str, job: str, count: int) -> None:
        """`count` new jobs landed in `queue` (direct enqueue, cron fire, outbox publish)."""
        ...

    def running(self, job: ClaimedJob) -> AbstractContextManager[None]:
        """Around one claimed job's run, from its admission to its settle."""
        ...

    def settled(self, job: ClaimedJob, outcome: Outcome, error: str | None) -> None:
        """The settle room ended a run with `outcome` (the store took it, or it was cancelled)."""
        ...

    def lease_lost(self, job: ClaimedJob) -> None:
        """A settle missed its fence: the claim had moved on."""
        ...

    def buried(self, queue: str, job: str) -> None:
        """A claim buried a lapsed lease on its final attempt."""
        ...

    def step(self, name: str) -> AbstractContextManager[None]:
        """Around one `step.run` call of the step's function (not a replay)."""
        ...

    def step_event(self, kind: str, name: str) -> None:
        """A step replayed (`replay`), a run slept (`sleep`) or waits for an event (`wait`)."""
        ...

    def cron_fired(self, task: str) -> None:
        """The scheduler fired one occurrence of `task`."""
        ...

    def fan_in(self, job: str, outcome: str) -> None:
        """A run of `job` resolved a fan-in (an invoke or a map): `completed` (every child's
        result read) or `failed` (a child failed it fast)."""
        ...

    def relaying(self, rows: Sequence[NewJob]) -> AbstractContextManager[None]:
        """Around one relay pass publishing staged `rows`."""
        ...

    def published(self, queue: str, count: int) -> None:
        """The relay published `count` new jobs into `queue` from the outbox."""
        ...

    def leader(self, role: str, leading: bool) -> None:
        """This process's `role` took or lost leadership."""
        ...

    def loop_beat(self, role: str, next_within_s: float) -> None:
        """A role's loop finished a pass and will be back within `next_within_s` seconds."""
        ...

    def draining(self, role: str, within_s: float) -> None:
        """A role stopped taking work (SIGTERM) and drains for at most `within_s` seconds."""
        ...


class _Sent:
    """A `Sending` that ignores what it is told."""

    def sent(self, job_ids: Sequence[str], fresh: int) -> None:
        """Nothing listens."""


_SENT: Final = _Sent()


class NoopObserver:
    """The default observer: disabled, every member does nothing."""

    enabled = False

    def sending(
        self, queue: str, job: str, count: int, *, operation: str = "send"
    ) -> AbstractContextManager[Sending]:
        """A context that records nothing."""
        return nullcontext(_SENT)

    def enqueued(self, queue: str, job: str, count: int) -> None:
        """Nothing listens."""

    def running(self, job: ClaimedJob) -> AbstractContextManager[None]:
        """A context that records nothing."""
        return nullcontext()

    def settled(self, job: ClaimedJob, outcome: Outcome, error: str | None) -> None:
        """Nothing listens."""

    def lease_lost(self, job: ClaimedJob) -> None:
        """Nothing listens."""

    def buried(self, queue: str, job: str) -> None:
        """Nothing listens."""

    def step(self, name: str) -> AbstractContextManager[None]:
        """A context that records nothing."""
        return nullcontext()

    def step_event(self, kind: str, name: str) -> None:
        """Nothing listens."""

    def cron_fired(self, task: str) -> None:
        """Nothing listens."""

    def fan_in(self, job: str, outcome: str) -> None:
        """Nothing listens."""

    def relaying(self, rows: Sequence[NewJob]) -> AbstractContextManager[None]:
        """A context that records nothing."""
        return nullcontext()

    def published(self, queue: str, count: int) -> None:
        """Nothing listens."""

    def leader(self, role: str, leading: bool) -> None:
        """Nothing listens."""

    def loop_beat(self, role: str, next_within_s: float) -> None:
        """Nothing listens."""

    def draining(self, role: str, within_s: float) -> None:
        """Nothing listens."""


NOOP: Final[Observer] = NoopObserver()
