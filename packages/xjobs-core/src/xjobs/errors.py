"""Every refusal xjobs raises: one `XJobsError` base, one subclass per refusal, each with a stable `.code`."""

from __future__ import annotations

from typing import ClassVar


class XJobsError(Exception):
    """Base of every xjobs refusal; `code` is stable and safe to match on."""

    code: ClassVar[str] = "XJOBS_ERROR"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"


class OptionInvalidError(XJobsError):
    """A numeric or enumerated option is not finite, out of range, or of the wrong kind."""

    code = "XJOBS_OPTION_INVALID"


class DeclarationInvalidError(XJobsError):
    """A `job()` or `task()` declaration is malformed (a bad name, a missing callable, …)."""

    code = "XJOBS_DECLARATION_INVALID"


class TenantRequiredError(XJobsError):
    """A job was declared without `tenant=` (a callable or the string "none")."""

    code = "XJOBS_TENANT_REQUIRED"


class IdempotencyKeyRequiredError(XJobsError):
    """A job was declared without an `idempotency_key=` callable."""

    code = "XJOBS_IDEMPOTENCY_KEY_REQUIRED"


class JobDuplicateError(XJobsError):
    """Two different declarations claim one durable job or task name."""

    code = "XJOBS_JOB_DUPLICATE"


class JobNotRegisteredError(XJobsError):
    """A job handle is used before an `App` registered it, or a row names an unknown job."""

    code = "XJOBS_JOB_NOT_REGISTERED"


class TaskNotRegisteredError(XJobsError):
    """A task name (to pause, resume, or read the fires of) is not registered with this App."""

    code = "XJOBS_TASK_NOT_REGISTERED"


class CronInvalidError(XJobsError):
    """A task's cron expression does not parse or never matches."""

    code = "XJOBS_CRON_INVALID"


class TimeZoneInvalidError(XJobsError):
    """A task's `tz` is missing or not an IANA zone name."""

    code = "XJOBS_TZ_INVALID"


class InputInvalidError(XJobsError):
    """An input does not validate against the job's pydantic model."""

    code = "XJOBS_INPUT_INVALID"


class PayloadInvalidError(XJobsError):
    """A payload cannot be stored the same way on every backend (NUL, lone surrogate, too big)."""

    code = "XJOBS_PAYLOAD_INVALID"


class QueueNameInvalidError(XJobsError):
    """A queue name is empty, too long, or has characters outside `[A-Za-z0-9_.-]`."""

    code = "XJOBS_QUEUE_INVALID"


class KeyUnderivableError(XJobsError):
    """A declared callable (tenant, idempotency key, concurrency key) raised or returned a non-string."""

    code = "XJOBS_KEY_UNDERIVABLE"

    def __init__(self, message: str, *, terminal: bool = False) -> None:
        super().__init__(message)
        # True where retrying cannot help: a worker admitting a run derives what every attempt would
        self.terminal = terminal


class JobTenantMismatchError(XJobsError):
    """An actor of one org enqueued a job whose input names another org (only a `tenant="none"`
    job may be enqueued across orgs)."""

    code = "XJOBS_JOB_TENANT_MISMATCH"


class ClaimQueuesEmptyError(XJobsError):
    """`claim` was asked for no queue at all."""

    code = "XJOBS_CLAIM_QUEUES_EMPTY"


class JobNotFoundError(XJobsError):
    """No job has the given id."""

    code = "XJOBS_JOB_NOT_FOUND"


class JobNotCancellableError(XJobsError):
    """The job has already finished (completed, failed, dead or cancelled)."""

    code = "XJOBS_JOB_NOT_CANCELLABLE"


class JobNotRequeueableError(XJobsError):
    """The job is still live (ready, running or waiting), so there is nothing to requeue."""

    code = "XJOBS_JOB_NOT_REQUEUEABLE"


class JobRequeueDuplicateError(XJobsError):
    """Another live job already holds this job's idempotency namespace."""

    code = "XJOBS_JOB_REQUEUE_DUPLICATE"


class JobNotPromotableError(XJobsError):
    """Only a `ready` job (delayed or retrying) can be promoted to run now."""

    code = "XJOBS_JOB_NOT_PROMOTABLE"


class JobNotRemovableError(XJobsError):
    """Only a finished job can be removed; cancel a live one first."""

    code = "XJOBS_JOB_NOT_REMOVABLE"


class JobPageInvalidError(XJobsError):
    """A list page asked for more than the maximum, or its cursor is garbled or from another filter."""

    code = "XJOBS_JOB_PAGE_INVALID"


class FilterInvalidError(XJobsError):
    """An operator filter names an unknown state, a bad queue or job name, or an empty range."""

    code = "XJOBS_FILTER_INVALID"


class TenantScopeInvalidError(XJobsError):
    """`operator.for_tenant` was given no tenant (None, "", too long, a NUL), or a scoped operator
    was asked for another tenant's scope: a scope is never widened or switched."""

    code = "XJOBS_TENANT_SCOPE_INVALID"


class TenantScopeSharedError(XJobsError):
    """A tenant-scoped operator asked to steer what every tenant shares (a queue or job-name pause)
    or to read every tenant's totals (the counters)."""

    code = "XJOBS_TENANT_SCOPE_SHARED"


class BackendUnknownError(XJobsError):
    """No installed plugin opens URLs of this scheme."""

    code = "XJOBS_BACKEND_UNKNOWN"


class BackendConflictError(XJobsError):
    """Two installed plugins claim one URL scheme."""

    code = "XJOBS_BACKEND_CONFLICT"


class DriverApiMismatchError(XJobsError):
    """A plugin was built for another version of the driver contract."""

    code = "XJOBS_DRIVER_API_MISMATCH"


class BackendClosedError(XJobsError):
    """The app or backend is not open (use `async with app:`)."""

    code = "XJOBS_BACKEND_CLOSED"


class CapabilityMissingError(XJobsError):
    """The backend does not offer a capability this call needs."""

    code = "XJOBS_CAPABILITY_MISSING"


class ConcurrencyUnenforceableError(XJobsError):
    """A job declares `concurrency` but the backend has no lease store to enforce it fleet-wide."""

    code = "XJOBS_CONCURRENCY_UNENFORCEABLE"


class RateUnenforceableError(XJobsError):
    """A rate limit is declared but the backend has no rate store to enforce it fleet-wide."""

    code = "XJOBS_RATE_UNENFORCEABLE"


class RateLimitedError(XJobsError):
    """A run over its rate: deferred to when a permit is free, uncounted (the code its log line carries)."""

    code = "XJOBS_RATE_LIMITED"


class WorkerStateError(XJobsError):
    """A worker was started twice, or started while it drains."""

    code = "XJOBS_WORKER_STATE"


class TimeoutExceededError(XJobsError):
    """The run's `timeout` elapsed: the body was cancelled, then the attempt failed."""

    code = "XJOBS_TIMEOUT"


class LeaseLostError(XJobsError):
    """The job's claim moved on: no heartbeat landed for a whole lease window, or a fenced write missed."""

    code = "XJOBS_LEASE_LOST"


class AbortedError(XJobsError):
    """The run was cancelled; it may write nothing more."""

    code = "XJOBS_ABORTED"


class DrainingError(XJobsError):
    """The worker is shutting down and the drain cut-off passed: the run is interrupted and retried."""

    code = "XJOBS_DRAINING"


class JobCancelledError(XJobsError):
    """An operator cancelled the job (while it ran, or before its result was read)."""

    code = "XJOBS_JOB_CANCELLED"


class AppStateError(XJobsError):
    """The app was used in a way its lifecycle does not allow (opened twice, a handle used outside it)."""

    code = "XJOBS_APP_STATE"


class AppLoadError(XJobsError):
    """`MODULE:APP` does not name an importable `xjobs.App`."""

    code = "XJOBS_APP_LOAD"


class Terminal(XJobsError):
    """Raise from a job body to fail the job for good: no retry, whatever attempts are left."""

    code = "XJOBS_TERMINAL"


class SlotLostError(XJobsError):
    """The run's fleet concurrency slot could not be renewed for a whole TTL: the run is cancelled."""

    code = "XJOBS_SLOT_LOST"


class BackendUnavailableError(XJobsError):
    """The engine cannot be reached (connection refused, lost, or restarting); the call may be retried."""

    code = "XJOBS_BACKEND_UNAVAILABLE"


class BackendError(XJobsError):
    """The engine refused a statement for a reason xjobs does not expect; the message carries the engine's."""

    code = "XJOBS_BACKEND_ERROR"


class LeaderUnsafeError(XJobsError):
    """A leader that needs a server session of its own (a session advisory lock) was asked to run
    where it cannot have one: behind a transaction-pooling proxy such as pgbouncer."""

    code = "XJOBS_LEADER_UNSAFE"


class SchemaInvalidError(XJobsError):
    """A schema name or key prefix is not a plain lower-case identifier."""

    code = "XJOBS_SCHEMA_INVALID"


class StepInvalidError(XJobsError):
    """A step was called with a bad name or argument, or its result cannot be stored as JSON."""

    code = "XJOBS_STEP_INVALID"
    terminal = True


class JobFailedError(XJobsError):
    """The job a result was asked for ended without one: dead-lettered or failed for good.

    `error_class` and `error_message` are those of the last attempt's error.
    """

    code = "XJOBS_JOB_FAILED"

    def __init__(self, message: str, *, error_class: str = "", error_message: str = "") -> None:
        super().__init__(message)
        self.error_class = error_class
        self.error_message = error_message


class ResultTimeoutError(XJobsError, TimeoutError):
    """No result within the wait's timeout (the job may still complete later)."""

    code = "XJOBS_RESULT_TIMEOUT"


class ResultInvalidError(Terminal):
    """What the body returned cannot be stored as a result: not JSON, or over `result_max_bytes`."""

    code = "XJOBS_RESULT_INVALID"


class StepInSyncBodyError(XJobsError):
    """A plain `def` body used `ctx.step`: durable steps need an `async def` body."""

    code = "XJOBS_STEP_NEEDS_ASYNC"


class StepDuplicateError(XJobsError):
    """Two steps of one run share a name; step names are unique within a run."""

    code = "XJOBS_STEP_DUPLICATE"
    terminal = True


class StepFailedError(XJobsError):
    """A step's function raised: live, its cause is the original error; on a replay it is rebuilt from the record."""

    code = "XJOBS_STEP_FAILED"

    def __init__(self, message: str, *, step: str, error_type: str, terminal: bool) -> None:
        super().__init__(message)
        self.step = step
        self.error_type = error_type
        self.terminal = terminal


class StepTimeoutError(XJobsError):
    """A step ran past the job's `step_timeout`: the step was cancelled and the attempt fails."""

    code = "XJOBS_STEP_TIMEOUT"


class EventInvalidError(XJobsError):
    """An event name, payload or match was refused (not a JSON object, too large, bad name); a NUL is `PayloadInvalidError`."""

    code = "XJOBS_EVENT_INVALID"


class OutboxConnectionInvalidError(XJobsError):
    """`stage()` was handed a connection the outbox store cannot stage on (not a psycopg 3 sync or
    async connection, nor an asyncpg connection, for Postgres)."""

    code = "XJOBS_OUTBOX_CONNECTION_INVALID"


class ExtraMissingError(XJobsError):
    """A call needs an optional distribution that is not installed (`xjobs-web` for the dashboard
    and the MCP server)."""

    code = "XJOBS_EXTRA_MISSING"


# The factories' refusals: their classes live beside the factories (`factories/backfill_errors.py`),
# their codes here, with every other code.
BACKFILL_STALLED = "XJOBS_BACKFILL_STALLED"
BACKFILL_ENVIRONMENT = "XJOBS_BACKFILL_ENVIRONMENT"
BACKFILL_REQUIRES = "XJOBS_BACKFILL_REQUIRES"
BACKFILL_APPLIED = "XJOBS_BACKFILL_APPLIED"
BACKFILL_SCOPE = "XJOBS_BACKFILL_SCOPE"
BACKFILL_CURSOR = "XJOBS_BACKFILL_CURSOR"
BACKFILL_INVALID = "XJOBS_BACKFILL_INVALID"
EXPORT_SCOPE = "XJOBS_EXPORT_SCOPE"
EXPORT_SINK = "XJOBS_EXPORT_SINK"
WEBHOOK_INVALID = "XJOBS_WEBHOOK_INVALID"
WEBHOOK_SIGNATURE = "XJOBS_WEBHOOK_SIGNATURE_INVALID"
WEBHOOK_ENDPOINT_UNKNOWN = "XJOBS_WEBHOOK_ENDPOINT_UNKNOWN"
WEBHOOK_ENDPOINT_DISABLED = "XJOBS_WEBHOOK_ENDPOINT_DISABLED"
WEBHOOK_REJECTED = "XJOBS_WEBHOOK_REJECTED"
WEBHOOK_FAILED = "XJOBS_WEBHOOK_FAILED"
WEBHOOK_ADDRESS_REFUSED = "XJOBS_WEBHOOK_ADDRESS_REFUSED"
JOB_TENANT_MISMATCH = "XJOBS_JOB_TENANT_MISMATCH"
