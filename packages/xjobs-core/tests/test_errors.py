"""Every refusal is its own `XJobsError` subclass with a stable `.code` (errors.py)."""

from __future__ import annotations

import inspect

import pytest

from xjobs import errors
from xjobs.errors import OptionInvalidError, Terminal, XJobsError

# The codes are a public contract: callers match on them, so a rename is a breaking change.
STABLE_CODES = {
    "XJobsError": "XJOBS_ERROR",
    "OptionInvalidError": "XJOBS_OPTION_INVALID",
    "DeclarationInvalidError": "XJOBS_DECLARATION_INVALID",
    "TenantRequiredError": "XJOBS_TENANT_REQUIRED",
    "IdempotencyKeyRequiredError": "XJOBS_IDEMPOTENCY_KEY_REQUIRED",
    "JobDuplicateError": "XJOBS_JOB_DUPLICATE",
    "JobNotRegisteredError": "XJOBS_JOB_NOT_REGISTERED",
    "TaskNotRegisteredError": "XJOBS_TASK_NOT_REGISTERED",
    "OutboxConnectionInvalidError": "XJOBS_OUTBOX_CONNECTION_INVALID",
    "CronInvalidError": "XJOBS_CRON_INVALID",
    "TimeZoneInvalidError": "XJOBS_TZ_INVALID",
    "InputInvalidError": "XJOBS_INPUT_INVALID",
    "PayloadInvalidError": "XJOBS_PAYLOAD_INVALID",
    "QueueNameInvalidError": "XJOBS_QUEUE_INVALID",
    "KeyUnderivableError": "XJOBS_KEY_UNDERIVABLE",
    "JobTenantMismatchError": "XJOBS_JOB_TENANT_MISMATCH",
    "ClaimQueuesEmptyError": "XJOBS_CLAIM_QUEUES_EMPTY",
    "JobNotFoundError": "XJOBS_JOB_NOT_FOUND",
    "JobNotCancellableError": "XJOBS_JOB_NOT_CANCELLABLE",
    "JobNotRequeueableError": "XJOBS_JOB_NOT_REQUEUEABLE",
    "JobRequeueDuplicateError": "XJOBS_JOB_REQUEUE_DUPLICATE",
    "JobNotPromotableError": "XJOBS_JOB_NOT_PROMOTABLE",
    "JobNotRemovableError": "XJOBS_JOB_NOT_REMOVABLE",
    "JobPageInvalidError": "XJOBS_JOB_PAGE_INVALID",
    "FilterInvalidError": "XJOBS_FILTER_INVALID",
    "StepInSyncBodyError": "XJOBS_STEP_NEEDS_ASYNC",
    "JobFailedError": "XJOBS_JOB_FAILED",
    "ResultInvalidError": "XJOBS_RESULT_INVALID",
    "ResultTimeoutError": "XJOBS_RESULT_TIMEOUT",
    "BackendUnknownError": "XJOBS_BACKEND_UNKNOWN",
    "BackendConflictError": "XJOBS_BACKEND_CONFLICT",
    "DriverApiMismatchError": "XJOBS_DRIVER_API_MISMATCH",
    "BackendClosedError": "XJOBS_BACKEND_CLOSED",
    "CapabilityMissingError": "XJOBS_CAPABILITY_MISSING",
    "ConcurrencyUnenforceableError": "XJOBS_CONCURRENCY_UNENFORCEABLE",
    "WorkerStateError": "XJOBS_WORKER_STATE",
    "TimeoutExceededError": "XJOBS_TIMEOUT",
    "LeaseLostError": "XJOBS_LEASE_LOST",
    "AbortedError": "XJOBS_ABORTED",
    "DrainingError": "XJOBS_DRAINING",
    "JobCancelledError": "XJOBS_JOB_CANCELLED",
    "AppStateError": "XJOBS_APP_STATE",
    "AppLoadError": "XJOBS_APP_LOAD",
    "Terminal": "XJOBS_TERMINAL",
    "SlotLostError": "XJOBS_SLOT_LOST",
    "BackendUnavailableError": "XJOBS_BACKEND_UNAVAILABLE",
    "BackendError": "XJOBS_BACKEND_ERROR",
    "LeaderUnsafeError": "XJOBS_LEADER_UNSAFE",
    "SchemaInvalidError": "XJOBS_SCHEMA_INVALID",
    "StepInvalidError": "XJOBS_STEP_INVALID",
    "StepDuplicateError": "XJOBS_STEP_DUPLICATE",
    "StepFailedError": "XJOBS_STEP_FAILED",
    "StepTimeoutError": "XJOBS_STEP_TIMEOUT",
    "EventInvalidError": "XJOBS_EVENT_INVALID",
    "ExtraMissingError": "XJOBS_EXTRA_MISSING",
    "RateLimitedError": "XJOBS_RATE_LIMITED",
    "RateUnenforceableError": "XJOBS_RATE_UNENFORCEABLE",
    "TenantScopeInvalidError": "XJOBS_TENANT_SCOPE_INVALID",
    "TenantScopeSharedError": "XJOBS_TENANT_SCOPE_SHARED",
    "ChildFailedError": "XJOBS_CHILD_FAILED",
    "ChildTenantMismatchError": "XJOBS_CHILD_TENANT_MISMATCH",
    "ChildrenInvalidError": "XJOBS_CHILDREN_INVALID",
}


def _error_classes() -> list[type[XJobsError]]:
    return [
        value
        for _, value in inspect.getmembers(errors, inspect.isclass)
        if issubclass(value, XJobsError) and value.__module__ == errors.__name__
    ]


def test_every_error_class_has_its_stable_code() -> None:
    found = {cls.__name__: cls.code for cls in _error_classes()}
    assert found == STABLE_CODES


def test_codes_are_unique_so_a_code_names_one_refusal() -> None:
    codes = [cls.code for cls in _error_classes()]
    assert len(codes) == len(set(codes))


@pytest.mark.parametrize("cls", _error_classes(), ids=lambda cls: cls.__name__)
def test_every_code_is_an_xjobs_code(cls: type[XJobsError]) -> None:
    assert cls.code.startswith("XJOBS_")
    assert cls.code == cls.code.upper()


@pytest.mark.parametrize("cls", _error_classes(), ids=lambda cls: cls.__name__)
def test_every_error_says_what_it_is_in_a_docstring(cls: type[XJobsError]) -> None:
    assert cls.__doc__ is not None
    assert cls.__doc__.strip()


def test_an_error_renders_as_its_code_then_its_message() -> None:
    error = OptionInvalidError("timeout must be positive, got 0")
    assert str(error) == "XJOBS_OPTION_INVALID: timeout must be positive, got 0"
    assert error.message == "timeout must be positive, got 0"
    assert error.args == ("timeout must be positive, got 0",)


def test_the_code_is_readable_on_an_instance() -> None:
    assert OptionInvalidError("x").code == "XJOBS_OPTION_INVALID"


def test_every_refusal_is_caught_by_the_one_base() -> None:
    with pytest.raises(XJobsError) as caught:
        raise OptionInvalidError("priority must be at most 9, got 10")
    assert caught.value.code == "XJOBS_OPTION_INVALID"


def test_terminal_is_an_xjobs_error_users_can_raise() -> None:
    with pytest.raises(XJobsError) as caught:
        raise Terminal("the invoice was deleted")
    assert isinstance(caught.value, Terminal)
    assert caught.value.code == "XJOBS_TERMINAL"


def test_a_subclass_code_does_not_leak_into_the_base() -> None:
    assert XJobsError("x").code == "XJOBS_ERROR"
