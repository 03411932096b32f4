"""The one translation of redis-py's errors into xjobs refusals."""

from __future__ import annotations

from redis import exceptions as redis_errors

from xjobs.errors import BackendError, BackendUnavailableError, XJobsError

# Each is an engine that cannot answer now but may soon (down, loading, failing over, busy):
# the caller may retry. BusyLoadingError and the authentication errors are ConnectionErrors.
_UNAVAILABLE = (
    OSError,
    TimeoutError,
    redis_errors.ConnectionError,
    redis_errors.TimeoutError,
    redis_errors.ReadOnlyError,
    redis_errors.ClusterDownError,
    redis_errors.TryAgainError,
)


def interpret_error(exc: BaseException) -> XJobsError:
    """An `XJobsError` for an engine error: unreachable (retryable) or refused (with the engine's text)."""
    if isinstance(exc, XJobsError):
        return exc
    if isinstance(exc, _UNAVAILABLE):
        return BackendUnavailableError(f"Redis is unreachable: {type(exc).__name__}: {exc}")
    return BackendError(f"Redis refused a command: {type(exc).__name__}: {exc}")
