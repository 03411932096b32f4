"""`Role`: the lifecycle the worker, the scheduler and the relay share, as `App`'s run frame and the CLI use it."""

from __future__ import annotations

from typing import Literal, Protocol, runtime_checkable

RoleState = Literal["new", "running", "draining", "closed"]


class RoleOptions(Protocol):
    """What the run frame reads of a role's resolved options."""

    @property
    def drain_timeout_ms(self) -> int:
        """How long a SIGTERM drain may take."""
        ...


class RoleStats(Protocol):
    """A role's counters since it started: whose they are, and each count by name."""

    @property
    def role_id(self) -> str:
        """The id of the role these counts belong to."""
        ...

    def as_dict(self) -> dict[str, int]:
        """The counters by name (the id is not a count)."""
        ...


@runtime_checkable
class Role(Protocol):
    """A long-running role: `new` → `running` (`start`, once) → `draining` → `closed`.

    Shutdown has two phases: `stop_accepting()` takes no new work and aborts nothing; `close()`
    waits out what is in flight and tears down, joined. `interrupt()` is the second signal's cut:
    what is in flight is aborted now.
    """

    @property
    def id(self) -> str:
        """The role's id, as its logs and the worker registry name it."""
        ...

    @property
    def state(self) -> RoleState:
        """Where the role is in its lifecycle: new, running, draining or closed."""
        ...

    @property
    def options(self) -> RoleOptions:
        """The role's resolved options."""
        ...

    @property
    def stats(self) -> RoleStats:
        """The role's counters since it started."""
        ...

    async def start(self, *, until_idle: bool = False) -> None:
        """Start the loop; with `until_idle`, it ends once it finds nothing to do."""
        ...

    async def wait(self) -> None:
        """Until the loop ends or the drain begins."""
        ...

    def stop_accepting(self, *, drain_timeout_ms: int | None = None) -> None:
        """Phase one; `drain_timeout_ms` bounds the drain (SIGTERM passes `options.drain_timeout_ms`)."""
        ...

    def interrupt(self) -> None:
        """Cut the drain short: stop accepting, and abort what is in flight now."""
        ...

    async def close(self) -> None:
        """Phase two: wait out what is in flight, then tear down (idempotent)."""
        ...
