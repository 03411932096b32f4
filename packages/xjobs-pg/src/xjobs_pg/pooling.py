"""What a pooling proxy in front of Postgres changes: the URL's declared `xjobs_pooler`, the statement cache, the check for an undeclared proxy.

`xjobs_pooler=transaction` (pgbouncer `pool_mode = transaction`): asyncpg's statement cache is
off unless `xjobs_prepared_statements=on` (pgbouncer 1.21+ with `max_prepared_statements`), no
`LISTEN` session is held (the wake cannot cross the proxy: workers poll), and the advisory leader
refuses. `xjobs_pooler=session`: nothing changes. Undeclared, a proxy found at open is refused.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, Literal

import asyncpg

from xjobs.errors import LeaderUnsafeError, OptionInvalidError
from xjobs_pg.errors import interpret_error
from xjobs_pg.sql import Statements

PoolerMode = Literal["none", "session", "transaction"]
MODES: tuple[PoolerMode, ...] = ("none", "session", "transaction")
SWITCHES = {"on": True, "off": False}


@dataclasses.dataclass(frozen=True, slots=True)
class Pooling:
    """The pool mode of the proxy the URL declares (`none`: straight to Postgres) and whether statements are prepared."""

    mode: PoolerMode = "none"
    prepared_statements: bool = True

    @classmethod
    def from_options(cls, options: Mapping[str, str]) -> Pooling:
        """Read `pooler` and `prepared_statements` (the URL's `xjobs_*` options); a bad value is refused."""
        mode = options.get("pooler", "none")
        if mode not in MODES:
            raise OptionInvalidError(
                f"xjobs_pooler must be one of {', '.join(MODES)}, got {mode!r}"
            )
        default = "off" if mode == "transaction" else "on"
        prepared = options.get("prepared_statements", default)
        if prepared not in SWITCHES:
            raise OptionInvalidError(
                f"xjobs_prepared_statements must be on or off, got {prepared!r}"
            )
        return cls(mode, SWITCHES[prepared])

    @property
    def listens(self) -> bool:
        """Whether a `LISTEN` session can hear anything: not through a transaction-pooling proxy."""
        return self.mode != "transaction"

    def connect_options(self, connect: Mapping[str, Any]) -> dict[str, Any]:
        """asyncpg's connect options: the statement cache off when statements are not prepared
        (asyncpg then re-parses an unnamed statement in the same round trip as its bind)."""
        options = dict(connect)
        if not self.prepared_statements:
            options.setdefault("statement_cache_size", 0)
        return options

    def pool_options(self, connect: Mapping[str, Any]) -> dict[str, Any]:
        """The connect options of the statement pool: also the JIT compiler off and the generic
        plan of each prepared statement kept, on a session of its own.

        The claim's estimated cost grows with the table (its due scan is estimated as a third of
        the claimable rows), and past `jit_above_cost` the server JIT-compiles it on every run:
        beside 1,000,000 rows that was 50 ms of compiling for a claim of 1 ms.

        Every statement is an index walk whatever its parameters, so the generic plan is kept.
        Left to `auto`, a connection can plan each claim, ack and heartbeat afresh for good: a
        connection that ran them while the table was small went on planning them afresh after
        the table grew to 1,000,000 rows. That was half of W3's rate on a fresh connection (W6
        after W3 in one process: 0.57x, against 1.0x when forced generic).

        Through a proxy no startup setting reaches the server (pgbouncer refuses unknown ones),
        so there the role or the database carries both (docs/operations.md).
        """
        options = self.connect_options(connect)
        if self.mode == "none":
            settings = dict(options.get("server_settings") or {})
            settings.setdefault("jit", "off")
            settings.setdefault("plan_cache_mode", "force_generic_plan")
            options["server_settings"] = settings
        return options

    def refuse_session_leader(self, what: str) -> None:
        """Raise `LeaderUnsafeError` when a transaction-pooling proxy is declared."""
        if self.mode == "transaction":
            raise LeaderUnsafeError(
                f"{what} needs a server session of its own, and the URL declares a transaction-"
                "pooling proxy (xjobs_pooler=transaction): use the lease leader (the backend's "
                "default), or connect this leader straight to Postgres"
            )


async def behind_proxy(
    conn: asyncpg.Connection | asyncpg.pool.PoolConnectionProxy, statements: Statements
) -> bool:
    """Whether `conn` reaches Postgres through a proxy: the server session's pid is not the one
    the connection was given at connect (a proxy makes one up)."""
    try:
        pid = await conn.fetchval(statements["backend_pid"])
    except asyncpg.InvalidSQLStatementNameError:
        return True  # a prepared statement lost between two messages: only a proxy does that
    except Exception as exc:
        raise interpret_error(exc) from exc
    return bool(pid != conn.get_server_pid())


def refused_startup_setting(exc: BaseException) -> bool:
    """Whether a connect failed on a startup setting the server refused: what a proxy answers
    (pgbouncer: `unsupported startup parameter`), never Postgres itself."""
    return isinstance(exc, asyncpg.ProtocolViolationError) and "startup parameter" in str(exc)


def undeclared_proxy(url_hint: str) -> OptionInvalidError:
    """The refusal of a proxy the URL does not declare."""
    return OptionInvalidError(
        f"Postgres at {url_hint} answers through a pooling proxy (the server session's pid is not "
        "the one the connection was given): declare its pool mode in the URL, "
        "xjobs_pooler=transaction (pgbouncer pool_mode = transaction) or xjobs_pooler=session"
    )
