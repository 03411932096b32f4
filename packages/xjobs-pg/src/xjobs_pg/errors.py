"""The one translation of asyncpg's (and, for staging, psycopg's) errors into xjobs refusals."""

from __future__ import annotations

import asyncpg
import psycopg

from xjobs.errors import BackendError, BackendUnavailableError, XJobsError

_UNAVAILABLE = (
    OSError,
    ConnectionError,
    asyncpg.PostgresConnectionError,
    asyncpg.ConnectionDoesNotExistError,
    asyncpg.CannotConnectNowError,
    asyncpg.AdminShutdownError,
    asyncpg.InterfaceError,
    psycopg.OperationalError,
    psycopg.InterfaceError,
)


def interpret_error(exc: BaseException) -> XJobsError:
    """An `XJobsError` for an engine error: unreachable (retryable) or refused (with the engine's text)."""
    if isinstance(exc, XJobsError):
        return exc
    if isinstance(exc, (*_UNAVAILABLE, TimeoutError)):
        return BackendUnavailableError(f"Postgres is unreachable: {type(exc).__name__}: {exc}")
    return BackendError(f"Postgres refused a statement: {type(exc).__name__}: {exc}")
