"""xjobs: durable background jobs for Python services — declare a job, enqueue it, run workers."""

from __future__ import annotations

from xjobs.actor import Actor, current_actor, run_with_context
from xjobs.app import App
from xjobs.clock import Clock, ManualClock, SystemClock
from xjobs.contract.backend import Backend
from xjobs.contract.driver import (
    DRIVER_API_VERSION,
    LIVE_STATES,
    BulkResult,
    EnqueueResult,
    JobDriver,
    JobRecord,
)
from xjobs.contract.factory import BackendFactory
from xjobs.contract.hookspecs import hookimpl
from xjobs.contract.introspection import JobFilter, JobPage, RequeueFilter
from xjobs.contract.plugins import connect, installed_backends
from xjobs.contract.retention import Retention
from xjobs.contract.stores import EventRecord, StepRecord, TaskFire
from xjobs.declare.concurrency import Concurrency
from xjobs.declare.job import JobHandle, Redact, job
from xjobs.declare.rate import Rate
from xjobs.declare.retry import Retry
from xjobs.declare.task import TaskHandle, task
from xjobs.errors import ChildFailedError, StepFailedError, Terminal, XJobsError
from xjobs.operate.operator import Operator
from xjobs.roles.relay import Relay
from xjobs.roles.relay_stats import RelayStats
from xjobs.roles.role import Role, RoleStats
from xjobs.roles.scheduler import Scheduler
from xjobs.roles.scheduler_stats import SchedulerStats
from xjobs.roles.worker import Worker
from xjobs.roles.worker_stats import WorkerStats
from xjobs.run.children import ChildSteps
from xjobs.run.context import JobContext, SyncJobContext
from xjobs.run.settled import Settled
from xjobs.run.steps import StepApi, StepSuspension
from xjobs.version import __version__

__all__ = [
    "DRIVER_API_VERSION",
    "LIVE_STATES",
    "Actor",
    "App",
    "Backend",
    "BackendFactory",
    "BulkResult",
    "ChildFailedError",
    "ChildSteps",
    "Clock",
    "Concurrency",
    "EnqueueResult",
    "EventRecord",
    "JobContext",
    "JobDriver",
    "JobFilter",
    "JobHandle",
    "JobPage",
    "JobRecord",
    "ManualClock",
    "Operator",
    "Rate",
    "Redact",
    "Relay",
    "RelayStats",
    "RequeueFilter",
    "Retention",
    "Retry",
    "Role",
    "RoleStats",
    "Scheduler",
    "SchedulerStats",
    "Settled",
    "StepApi",
    "StepFailedError",
    "StepRecord",
    "StepSuspension",
    "SyncJobContext",
    "SystemClock",
    "TaskFire",
    "TaskHandle",
    "Terminal",
    "Worker",
    "WorkerStats",
    "XJobsError",
    "__version__",
    "connect",
    "current_actor",
    "hookimpl",
    "installed_backends",
    "job",
    "run_with_context",
    "task",
]
