"""Every refusal xjobs raises: one `XJobsError` base, one subclass per refusal, each with a stable `.code`."""

from __future__ import annotations

from typing import ClassVar


class XJobsError(Exception):
    """Base of every xjobs refusal; `code` is stable and safe to match on.

    To do: Match on a subclass's `code`; `str(error)` is `CODE: message`.
    """

    code: ClassVar[str] = "XJOBS_ERROR"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"


class OptionInvalidError(XJobsError):
    """A numeric or enumerated option is not finite, out of range, or of the wrong kind.

    To do: Fix the option the message names.
    """

    code = "XJOBS_OPTION_INVALID"


class DeclarationInvalidError(XJobsError):
    """A `job()` or `task()` declaration is malformed (a bad name, a missing callable, …).

    To do: Fix the declaration as the message says; it is refused when the module is imported,
    before anything runs.
    """

    code = "XJOBS_DECLARATION_INVALID"


class TenantRequiredError(XJobsError):
    """A job was declared without `tenant=` (a callable or the string "none").

    To do: Pass `tenant=lambda input: input.org_id` (whose job it is), or `tenant="none"`.
    """

    code = "XJOBS_TENANT_REQUIRED"


class IdempotencyKeyRequiredError(XJobsError):
    """A job was declared without an `idempotency_key=` callable.

    To do: Pass `idempotency_key=lambda input: …`: which enqueues are the same job.
    """

    code = "XJOBS_IDEMPOTENCY_KEY_REQUIRED"


class JobDuplicateError(XJobsError):
    """Two different declarations claim one durable job or task name.

    To do: Give one of the two a different `name=`, or register the same handle once.
    """

    code = "XJOBS_JOB_DUPLICATE"


class JobNotRegisteredError(XJobsError):
    """A job handle is used before an `App` registered it, or a row names an unknown job.

    To do: Register the job with the `App` (`jobs=[…]`) the worker runs; a row of a removed job
    needs its declaration back, or remove the row.
    """

    code = "XJOBS_JOB_NOT_REGISTERED"


class TaskNotRegisteredError(XJobsError):
    """A task name (to pause, resume, or read the fires of) is not registered with this App.

    To do: Check the name (`xjobs tasks list`), or register the task with `App(tasks=[…])`.
    """

    code = "XJOBS_TASK_NOT_REGISTERED"


class CronInvalidError(XJobsError):
    """A task's cron expression does not parse or never matches.

    To do: Fix the expression as the message says.
    """

    code = "XJOBS_CRON_INVALID"


class TimeZoneInvalidError(XJobsError):
    """A task's `tz` is missing or not an IANA zone name.

    To do: Pass an IANA zone name (`tz="Europe/Berlin"`, `tz="UTC"`).
    """

    code = "XJOBS_TZ_INVALID"


class InputInvalidError(XJobsError):
    """An input does not validate against the job's pydantic model.

    To do: Fix the input; the message lists pydantic's errors. Nothing was enqueued.
    """

    code = "XJOBS_INPUT_INVALID"


class PayloadInvalidError(XJobsError):
    """A payload cannot be stored the same way on every backend (NUL, lone surrogate, too big).

    To do: Remove the NUL or lone surrogate, or store a large payload elsewhere and enqueue its
    reference.
    """

    code = "XJOBS_PAYLOAD_INVALID"


class QueueNameInvalidError(XJobsError):
    """A queue name is empty, too long, or has characters outside `[A-Za-z0-9_.-]`.

    To do: Use a queue name of letters, digits and `_.-`.
    """

    code = "XJOBS_QUEUE_INVALID"


class KeyUnderivableError(XJobsError):
    """A declared callable (tenant, idempotency key, concurrency key) raised or returned a non-string.

    To do: Make the callable return a non-empty string (at most 512 characters, no NUL) for
    every valid input.
    """

    code = "XJOBS_KEY_UNDERIVABLE"

    def __init__(self, message: str, *, terminal: bool = False) -> None:
        super().__init__(message)
        # True where retrying cannot help: a worker admitting a run derives what every attempt would
        self.terminal = terminal


class JobTenantMismatchError(XJobsError):
    """An actor of one org enqueued a job whose input names another org (only a `tenant="none"`
    job may be enqueued across orgs).

    To do: Enqueue the job as its own org, or declare it `tenant="none"` for a cross-tenant fan-
    out.
    """

    code = "XJOBS_JOB_TENANT_MISMATCH"


class ClaimQueuesEmptyError(XJobsError):
    """`claim` was asked for no queue at all.

    To do: Pass at least one queue to the claim (a driver's bug if the worker passed none).
    """

    code = "XJOBS_CLAIM_QUEUES_EMPTY"


class JobNotFoundError(XJobsError):
    """No job has the given id.

    To do: Check the id; with retention on, a finished job is deleted once its time is up.
    """

    code = "XJOBS_JOB_NOT_FOUND"


class JobNotCancellableError(XJobsError):
    """The job has already finished (completed, failed, dead or cancelled).

    To do: Nothing: it has already ended.
    """

    code = "XJOBS_JOB_NOT_CANCELLABLE"


class JobNotRequeueableError(XJobsError):
    """The job is still live (ready, running or waiting), so there is nothing to requeue.

    To do: Nothing: the job is still live; wait for it to end.
    """

    code = "XJOBS_JOB_NOT_REQUEUEABLE"


class JobRequeueDuplicateError(XJobsError):
    """Another live job already holds this job's idempotency namespace.

    To do: Let the live job of that key finish (or cancel it), then retry this one.
    """

    code = "XJOBS_JOB_REQUEUE_DUPLICATE"


class JobNotPromotableError(XJobsError):
    """Only a `ready` job (delayed or retrying) can be promoted to run now.

    To do: Nothing for a running or finished job; retry a finished one instead.
    """

    code = "XJOBS_JOB_NOT_PROMOTABLE"


class JobNotRemovableError(XJobsError):
    """Only a finished job can be removed; cancel a live one first.

    To do: Cancel the job first, then remove it.
    """

    code = "XJOBS_JOB_NOT_REMOVABLE"


class JobPageInvalidError(XJobsError):
    """A list page asked for more than the maximum, or its cursor is garbled or from another filter.

    To do: Ask for at most `MAX_JOB_PAGE` rows, and pass back the cursor of the same filter
    unchanged.
    """

    code = "XJOBS_JOB_PAGE_INVALID"


class FilterInvalidError(XJobsError):
    """An operator filter names an unknown state, a bad queue or job name, or an empty range.

    To do: Fix the filter as the message says; `xjobs jobs list --help` lists the states.
    """

    code = "XJOBS_FILTER_INVALID"


class TenantScopeInvalidError(XJobsError):
    """`operator.for_tenant` was given no tenant (None, "", too long, a NUL), or a scoped operator
    was asked for another tenant's scope: a scope is never widened or switched.

    To do: Pass the tenant of the operator, a non-empty string; build a new operator for another
    tenant.
    """

    code = "XJOBS_TENANT_SCOPE_INVALID"


class TenantScopeSharedError(XJobsError):
    """A tenant-scoped operator asked to steer what every tenant shares (a queue or job-name pause)
    or to read every tenant's totals (the counters).

    To do: Do it with an unscoped operator (`app.operator`), which every tenant shares.
    """

    code = "XJOBS_TENANT_SCOPE_SHARED"


class BackendUnknownError(XJobsError):
    """No installed plugin opens URLs of this scheme.

    To do: Install the driver for that scheme (`xjobs-kit[pg]`, `xjobs-kit[redis]`, `xjobs-
    sqlite`); `xjobs backends` lists what is installed.
    """

    code = "XJOBS_BACKEND_UNKNOWN"


class BackendConflictError(XJobsError):
    """Two installed plugins claim one URL scheme.

    To do: Uninstall one of the two plugins.
    """

    code = "XJOBS_BACKEND_CONFLICT"


class DriverApiMismatchError(XJobsError):
    """A plugin was built for another version of the driver contract.

    To do: Upgrade the driver (or xjobs-core) so both speak the same `DRIVER_API_VERSION`.
    """

    code = "XJOBS_DRIVER_API_MISMATCH"


class BackendClosedError(XJobsError):
    """The app or backend is not open (use `async with app:`).

    To do: Call it inside `async with app:` (or after `await app.open()`).
    """

    code = "XJOBS_BACKEND_CLOSED"


class CapabilityMissingError(XJobsError):
    """The backend does not offer a capability this call needs.

    To do: Use a backend that declares the capability (`Backend.capabilities`), or install the
    extra the message names.
    """

    code = "XJOBS_CAPABILITY_MISSING"


class ConcurrencyUnenforceableError(XJobsError):
    """A job declares `concurrency` but the backend has no lease store to enforce it fleet-wide.

    To do: Use a backend with fleet slots (every built-in one has them), or drop `concurrency`.
    """

    code = "XJOBS_CONCURRENCY_UNENFORCEABLE"


class RateUnenforceableError(XJobsError):
    """A rate limit is declared but the backend has no rate store to enforce it fleet-wide.

    To do: Use a backend with a rate store (every built-in one has one), or drop the rate.
    """

    code = "XJOBS_RATE_UNENFORCEABLE"


class RateLimitedError(XJobsError):
    """A run over its rate: deferred to when a permit is free, uncounted (the code its log line carries).

    To do: Nothing: the run waits for a permit; raise the `Rate` if the wait is too long.
    """

    code = "XJOBS_RATE_LIMITED"


class WorkerStateError(XJobsError):
    """A worker was started twice, or started while it drains.

    To do: Start a worker once; build a new one to start again.
    """

    code = "XJOBS_WORKER_STATE"


class TimeoutExceededError(XJobsError):
    """The run's `timeout` elapsed: the body was cancelled, then the attempt failed.

    To do: Make the body faster, split it into steps, or raise `timeout`.
    """

    code = "XJOBS_TIMEOUT"


class LeaseLostError(XJobsError):
    """The job's claim moved on: no heartbeat landed for a whole lease window, or a fenced write missed.

    To do: Nothing: another worker owns the job now; the run's writes did not land. Frequent
    losses: a blocked event loop or a lease shorter than the pauses.
    """

    code = "XJOBS_LEASE_LOST"


class AbortedError(XJobsError):
    """The run was cancelled; it may write nothing more.

    To do: Nothing: the run was cancelled or drained and settles as such; a body that catches it
    should re-raise.
    """

    code = "XJOBS_ABORTED"


class DrainingError(XJobsError):
    """The worker is shutting down and the drain cut-off passed: the run is interrupted and retried.

    To do: Nothing: the job is retried without counting an attempt. Keep long work in durable
    steps so the retry resumes.
    """

    code = "XJOBS_DRAINING"


class JobCancelledError(XJobsError):
    """An operator cancelled the job (while it ran, or before its result was read).

    To do: Nothing, or retry the job (`xjobs jobs retry ID`) if the cancel was a mistake.
    """

    code = "XJOBS_JOB_CANCELLED"


class AppStateError(XJobsError):
    """The app was used in a way its lifecycle does not allow (opened twice, a handle used outside it).

    To do: Open the app once (`async with app:`) and use its handles inside that block.
    """

    code = "XJOBS_APP_STATE"


class AppLoadError(XJobsError):
    """`MODULE:APP` does not name an importable `xjobs.App`.

    To do: Check the module is importable from the working directory (or `PYTHONPATH`) and that
    the name after the colon is an `xjobs.App`.
    """

    code = "XJOBS_APP_LOAD"


class Terminal(XJobsError):
    """Raise from a job body to fail the job for good: no retry, whatever attempts are left.

    To do: Raise it when retrying cannot help (an input that can never succeed); raise anything
    else to retry.
    """

    code = "XJOBS_TERMINAL"


class SlotLostError(XJobsError):
    """The run's fleet concurrency slot could not be renewed for a whole TTL: the run is cancelled.

    To do: Nothing: the job is retried; frequent losses mean the slot store is unreachable or
    overloaded.
    """

    code = "XJOBS_SLOT_LOST"


class BackendUnavailableError(XJobsError):
    """The engine cannot be reached (connection refused, lost, or restarting); the call may be retried.

    To do: Retry the call (with the same input: the idempotency key makes the retry safe) once
    the engine is back.
    """

    code = "XJOBS_BACKEND_UNAVAILABLE"


class BackendError(XJobsError):
    """The engine refused a statement for a reason xjobs does not expect; the message carries the engine's.

    To do: Read the engine's message it carries; it is a bug or a misconfiguration of the
    engine, not a transient fault.
    """

    code = "XJOBS_BACKEND_ERROR"


class LeaderUnsafeError(XJobsError):
    """A leader that needs a server session of its own (a session advisory lock) was asked to run
    where it cannot have one: behind a transaction-pooling proxy such as pgbouncer.

    To do: Connect the scheduler directly to Postgres (not through pgbouncer), or use the lease
    leader (the default).
    """

    code = "XJOBS_LEADER_UNSAFE"


class SchemaInvalidError(XJobsError):
    """A schema name or key prefix is not a plain lower-case identifier.

    To do: Use a plain lower-case identifier.
    """

    code = "XJOBS_SCHEMA_INVALID"


class StepInvalidError(XJobsError):
    """A step was called with a bad name or argument, or its result cannot be stored as JSON.

    To do: Fix the step's name or arguments, and return JSON-able data from its function.
    """

    code = "XJOBS_STEP_INVALID"
    terminal = True


class JobFailedError(XJobsError):
    """The job a result was asked for ended without one: dead-lettered or failed for good.

    `error_class` and `error_message` are those of the last attempt's error.

    To do: Read the job's errors (`xjobs jobs show ID`), fix the cause, retry it (`xjobs jobs
    retry ID`).
    """

    code = "XJOBS_JOB_FAILED"

    def __init__(self, message: str, *, error_class: str = "", error_message: str = "") -> None:
        super().__init__(message)
        self.error_class = error_class
        self.error_message = error_message


class ResultTimeoutError(XJobsError, TimeoutError):
    """No result within the wait's timeout (the job may still complete later).

    To do: Wait again with a longer `timeout`, or check that a worker serves the job's queue.
    """

    code = "XJOBS_RESULT_TIMEOUT"


class ResultInvalidError(Terminal):
    """What the body returned cannot be stored as a result: not JSON, or over `result_max_bytes`.

    To do: Return JSON-able data (a pydantic model) under `result_max_bytes`, or store big
    results elsewhere.
    """

    code = "XJOBS_RESULT_INVALID"


class StepInSyncBodyError(XJobsError):
    """A plain `def` body used `ctx.step`: durable steps need an `async def` body.

    To do: Make the body `async def`.
    """

    code = "XJOBS_STEP_NEEDS_ASYNC"


class StepDuplicateError(XJobsError):
    """Two steps of one run share a name; step names are unique within a run.

    To do: Give each step of a run its own name (add the loop index to a step in a loop).
    """

    code = "XJOBS_STEP_DUPLICATE"
    terminal = True


class StepFailedError(XJobsError):
    """A step's function raised: live, its cause is the original error; on a replay it is rebuilt from the record.

    To do: Catch it in the body to handle the step's failure, or let it fail the attempt (the
    step runs again on the retry).
    """

    code = "XJOBS_STEP_FAILED"

    def __init__(self, message: str, *, step: str, error_type: str, terminal: bool) -> None:
        super().__init__(message)
        self.step = step
        self.error_type = error_type
        self.terminal = terminal


class StepTimeoutError(XJobsError):
    """A step ran past the job's `step_timeout`: the step was cancelled and the attempt fails.

    To do: Make the step faster, or raise `step_timeout`.
    """

    code = "XJOBS_STEP_TIMEOUT"


class EventInvalidError(XJobsError):
    """An event name, payload or match was refused (not a JSON object, too large, bad name); a NUL is `PayloadInvalidError`.

    To do: Send a JSON object under the size limit, with a valid name (the message says which
    part was refused).
    """

    code = "XJOBS_EVENT_INVALID"


class OutboxConnectionInvalidError(XJobsError):
    """`stage()` was handed a connection the outbox store cannot stage on (not a psycopg 3 sync or
    async connection, nor an asyncpg connection, for Postgres).

    To do: Pass the connection of the transaction itself (psycopg 3 or asyncpg; `sqlite3` for
    SQLite).
    """

    code = "XJOBS_OUTBOX_CONNECTION_INVALID"


class ExtraMissingError(XJobsError):
    """A call needs an optional distribution that is not installed (`xjobs-web` for the dashboard
    and the MCP server).

    To do: Install the distribution the message names (`pip install "xjobs-kit[web]"`).
    """

    code = "XJOBS_EXTRA_MISSING"


class ChildFailedError(XJobsError):
    """A child job a parent waited for (`ctx.step.invoke` / `ctx.step.map`) ended without a result:
    dead-lettered, failed for good, cancelled, or removed. It fails the parent for good (the child
    had its own retries; a retry of the parent would read the same ending). `step`, `index`,
    `job_id`, `state` and `last_error` name the child.

    To do: Read the child (`xjobs jobs show JOB_ID`), fix the cause, requeue the child (and any
    sibling the failure cancelled) and, once they completed, requeue the parent: its replay reads
    every child's result and goes on. Or pass `return_exceptions=True` to `map` to take each
    failed child's error in its place.
    """

    code = "XJOBS_CHILD_FAILED"
    terminal = True

    def __init__(
        self,
        message: str,
        *,
        step: str = "",
        index: int = -1,
        job_id: str = "",
        state: str = "",
        last_error: str | None = None,
    ) -> None:
        super().__init__(message)
        self.step = step
        self.index = index
        self.job_id = job_id
        self.state = state
        self.last_error = last_error


class ChildTenantMismatchError(XJobsError):
    """A parent run spawned a child whose input belongs to another tenant than the parent's run
    (or to no tenant, from a tenanted parent): children inherit the parent's tenant. Nothing of
    the step was written.

    To do: Spawn children of the parent's own org (`ctx.tenant`); work across orgs belongs to a
    `tenant="none"` parent.
    """

    code = "XJOBS_CHILD_TENANT_MISMATCH"
    terminal = True


class ChildrenInvalidError(XJobsError):
    """A child step (`invoke`, `map`, `spawn`) was called with something it cannot spawn: not a job
    handle, a plain `def` body's context, more children than a step may hold, or a replay whose
    inputs no longer match what the step recorded. Nothing of the step was written.

    To do: Pass a `job()` handle and its inputs; keep a step's inputs the same on every replay
    (derive them from the run's input or from earlier steps); split a larger fan-out into steps.
    """

    code = "XJOBS_CHILDREN_INVALID"
    terminal = True


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
