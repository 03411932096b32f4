"""The MCP server's confirmation step: a moving tool called without `confirm` answers a preview
and a one-time token bound to its exact arguments; only the same call with that token acts."""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from xjobs_web.errors import ConfirmationInvalidError

CONFIRM_TTL_S = 120.0
# Tokens waiting for their second call; past this the oldest is dropped (a client that previews
# without end cannot grow the server).
MAX_PENDING = 64


@dataclass(frozen=True, slots=True)
class Pending:
    """One issued token: the call it confirms and when it lapses (monotonic seconds)."""

    call: str
    expires_at: float


def _call(tool: str, arguments: dict[str, Any]) -> str:
    return json.dumps([tool, arguments], sort_keys=True, separators=(",", ":"))


class Confirmations:
    """The tokens issued by one server; each is spent by its first use, matched or not."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._pending: dict[str, Pending] = {}

    def issue(self, tool: str, arguments: dict[str, Any]) -> str:
        """A fresh token for exactly this call."""
        now = self._clock()
        for token in [t for t, p in self._pending.items() if p.expires_at <= now]:
            del self._pending[token]
        while len(self._pending) >= MAX_PENDING:
            del self._pending[next(iter(self._pending))]
        token = secrets.token_urlsafe(18)
        self._pending[token] = Pending(_call(tool, arguments), now + CONFIRM_TTL_S)
        return token

    def redeem(self, token: str, tool: str, arguments: dict[str, Any]) -> None:
        """Spend `token`; unless it was issued for exactly this call and has not lapsed,
        `XJOBS_CONFIRMATION_INVALID` (and nothing may be done)."""
        pending = self._pending.pop(token, None)
        if (
            pending is None
            or pending.expires_at <= self._clock()
            or pending.call != _call(tool, arguments)
        ):
            raise ConfirmationInvalidError(
                "the confirmation token is unknown, spent, expired, or was issued for other "
                "arguments; nothing was done. Call the tool again without confirm for a preview"
            )
