"""The one translation of redis-py's errors into xjobs refusals."""

from __future__ import annotations

from redis import exceptions as redis_errors

from xjobs.errors import BackendError, BackendUnavailableError, XJobsError


class RedisUrlInvalidError(XJobsError):
    """A Redis URL or option the driver cannot use: a `redis+sentinel://` URL without a sentinel
    or a service name, a port or database that is not a number, an unknown option, or
    `wait_replicas` where no single primary answers `WAIT` (a Redis Cluster).

    To do: Write `redis+sentinel://[user:password@]host:port[,host:port...]/service_name[/db]`
    (options `sentinel_username`, `sentinel_password`), and `wait_replicas=N` (with
    `wait_timeout_ms=`) on a `redis://` or `redis+sentinel://` URL only.
    """

    code = "XJOBS_REDIS_URL_INVALID"


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
# Error replies of a server that cannot take a write now but may soon: a replica whose link to
# its primary is down, or a primary with fewer good replicas than `min-replicas-to-write`.
_UNAVAILABLE_REPLIES = ("MASTERDOWN", "NOREPLICAS")


def interpret_error(exc: BaseException) -> XJobsError:
    """An `XJobsError` for an engine error: unreachable (retryable) or refused (with the engine's text)."""
    if isinstance(exc, XJobsError):
        return exc
    if isinstance(exc, _UNAVAILABLE) or (
        isinstance(exc, redis_errors.ResponseError) and str(exc).startswith(_UNAVAILABLE_REPLIES)
    ):
        return BackendUnavailableError(f"Redis is unreachable: {type(exc).__name__}: {exc}")
    return BackendError(f"Redis refused a command: {type(exc).__name__}: {exc}")
