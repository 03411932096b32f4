"""The ambient actor: who is acting (an org, a user), carried on `contextvars` across awaits."""

from __future__ import annotations

import contextvars
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Actor:
    """Who a piece of work acts for; inside a run only the org is set."""

    org_id: str | None = None
    user_id: str | None = None

    @property
    def id(self) -> str | None:
        """The id stamped as `enqueued_by`: the user where there is one, else the org."""
        return self.user_id or self.org_id


_ACTOR: contextvars.ContextVar[Actor | None] = contextvars.ContextVar("xjobs_actor", default=None)
_TRACEPARENT: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "xjobs_traceparent", default=None
)


def current_actor() -> Actor | None:
    """The actor of the running context, or `None` outside any."""
    return _ACTOR.get()


async def run_with_context(actor: Actor | None, fn: Callable[[], Awaitable[T]]) -> T:
    """Await `fn()` with `actor` as the ambient actor, restoring the previous one after."""
    token = _ACTOR.set(actor)
    try:
        return await fn()
    finally:
        _ACTOR.reset(token)


def set_actor(actor: Actor | None) -> contextvars.Token[Actor | None]:
    """Install `actor` for the rest of this context (a web request's middleware, say)."""
    return _ACTOR.set(actor)


def reset_actor(token: contextvars.Token[Actor | None]) -> None:
    """Undo a `set_actor`."""
    _ACTOR.reset(token)


def current_traceparent() -> str | None:
    """The W3C traceparent of the current span, if a tracer set one."""
    return _TRACEPARENT.get()


def set_traceparent(value: str | None) -> contextvars.Token[str | None]:
    """Install the W3C traceparent of the current span (tracing integrations call this)."""
    return _TRACEPARENT.set(value)


def traceparent_for_enqueue() -> str | None:
    """The traceparent to stamp on an enqueue: none when the span id is empty (all zeros)."""
    value = _TRACEPARENT.get()
    if not value:
        return None
    parts = value.split("-")
    if len(parts) != 4 or not parts[2].strip("0"):
        return None
    return value
