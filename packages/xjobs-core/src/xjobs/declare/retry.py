"""How a job retries: `Retry` as declared, resolved once, and the decision an error leads to."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta

from xjobs.backoff import backoff_delay_ms
from xjobs.errors import InputInvalidError, OptionInvalidError, Terminal
from xjobs.options import duration_ms, finite_count

MAX_ATTEMPTS = 1000


@dataclass(frozen=True, slots=True)
class Retry:
    """At most `attempts` runs in all; between them an exponential backoff from `base`, capped at `cap`."""

    attempts: int = 5
    base: timedelta = timedelta(seconds=1)
    cap: timedelta = timedelta(minutes=10)
    dead_letter: bool = True
    base_ms: int = field(init=False, repr=False)
    cap_ms: int = field(init=False, repr=False)

    def __post_init__(self) -> None:
        finite_count("retry.attempts", self.attempts, minimum=1, maximum=MAX_ATTEMPTS)
        object.__setattr__(self, "attempts", int(self.attempts))
        base_ms = duration_ms("retry.base", self.base, allow_zero=True)
        cap_ms = duration_ms("retry.cap", self.cap, allow_zero=True)
        if cap_ms < base_ms:
            raise OptionInvalidError(
                f"retry.cap ({self.cap}) must not be below retry.base ({self.base})"
            )
        object.__setattr__(self, "base_ms", base_ms)
        object.__setattr__(self, "cap_ms", cap_ms)
        if not isinstance(self.dead_letter, bool):
            raise OptionInvalidError(f"retry.dead_letter must be a bool, got {self.dead_letter!r}")

    def delay_ms(self, attempt: int) -> int:
        """The wait before the run after attempt number `attempt`."""
        return backoff_delay_ms(attempt, self.base_ms, self.cap_ms)


def is_final_attempt(retry: Retry, attempt: int) -> bool:
    """Whether attempt number `attempt` (1-based) is the last one the retry policy allows."""
    return attempt >= retry.attempts


def is_terminal_error(error: BaseException) -> bool:
    """Whether `error` says retrying cannot help: `xjobs.Terminal`, a bad input, or `terminal = True` on it or its class."""
    if isinstance(error, Terminal | InputInvalidError):
        return True
    return getattr(error, "terminal", False) is True


def requested_delay_ms(error: BaseException) -> int:
    """The wait an error asks for before the next attempt (`retry_after_ms` on it, a webhook
    receiver's `Retry-After`): the retry waits at least this long. 0 when it asks for none."""
    asked = getattr(error, "retry_after_ms", None)
    if isinstance(asked, int) and not isinstance(asked, bool) and asked > 0:
        return asked
    return 0
