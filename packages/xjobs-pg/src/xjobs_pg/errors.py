"""The one translation of asyncpg's (and, for staging, psycopg's) errors into xjobs refusals."""

from __future__ import annotations

import asyncpg
import psycopg
import psycopg.errors

from xjobs.errors import BackendError, BackendUnavailableError, XJobsError

# The server or the way to it went away: a restart, a failover, a cut. Class 08 (connection),
# 57P01 admin shutdown, 57P02 crash of another backend, 57P03 starting up or shutting down,
# 57P05 idle session timeout, 53300 too many connections (every client reconnecting at once),
# and asyncpg's own state errors of a connection broken mid-operation ("cannot switch to state
# 12; another operation (2) is in progress": the statement was never sent).
_UNAVAILABLE = (
    OSError,
    ConnectionError,
    TimeoutError,
    asyncpg.PostgresConnectionError,
    asyncpg.ConnectionDoesNotExistError,
    asyncpg.CannotConnectNowError,
    asyncpg.AdminShutdownError,
    asyncpg.CrashShutdownError,
    asyncpg.IdleSessionTimeoutError,
    asyncpg.TooManyConnectionsError,
    asyncpg.InterfaceError,
    asyncpg.InternalClientError,
    psycopg.OperationalError,
    psycopg.InterfaceError,
)

# 25006: the server takes no writes, a standby or a primary demoted by a failover (and the
# read-only session a pooler or a multi-host URL without target_session_attrs hands out).
_READ_ONLY = (asyncpg.ReadOnlySQLTransactionError, psycopg.errors.ReadOnlySqlTransaction)


def interpret_error(exc: BaseException) -> XJobsError:
    """An `XJobsError` for an engine error: unreachable or read-only (retryable), or refused (with
    the engine's text)."""
    if isinstance(exc, XJobsError):
        return exc
    if isinstance(exc, _UNAVAILABLE):
        return BackendUnavailableError(f"Postgres is unreachable: {type(exc).__name__}: {exc}")
    if isinstance(exc, _READ_ONLY):
        return BackendUnavailableError(
            f"Postgres takes no writes (a standby, or a primary a failover demoted): {exc}; "
            "point the URL at the primary, or list every host with target_session_attrs=read-write"
        )
    return BackendError(f"Postgres refused a statement: {type(exc).__name__}: {exc}")
