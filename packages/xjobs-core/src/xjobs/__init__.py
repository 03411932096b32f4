"""xjobs: durable background jobs for Python services — declare a job, enqueue it, run workers."""

from __future__ import annotations

from xjobs.app import App
from xjobs.backend import Backend
from xjobs.clock import Clock, ManualClock, SystemClock
from xjobs.concurrency import Concurrency
from xjobs.context import Actor, current_actor, run_with_context
from xjobs.driver import (
    DRIVER_API_VERSION,
    LIVE_STATES,
    BulkResult,
    EnqueueResult,
    JobDriver,
    JobRecord,
    RequeueFilter,
)
from xjobs.errors import StepFailedError, Terminal, XJobsError
from xjobs.hookspecs import hookimpl
from xjobs.job import JobHandle, job
from xjobs.job_context import JobContext
from xjobs.plugins import BackendFactory, connect, installed_backends
from xjobs.relay import Relay, RelayStats
from xjobs.retry import Retry
from xjobs.scheduler import Scheduler, SchedulerStats
from xjobs.settled import Settled
from xjobs.steps import StepApi, StepSuspension
from xjobs.stores import EventRecord, StepRecord, TaskFire
from xjobs.task import TaskHandle, task
from xjobs.worker import Worker
from xjobs.worker_stats import WorkerStats

__version__ = "0.1.0"

__all__ = [
    "DRIVER_API_VERSION",
    "LIVE_STATES",
    "Actor",
    "App",
    "Backend",
    "BackendFactory",
    "BulkResult",
    "Clock",
    "Concurrency",
    "EnqueueResult",
    "EventRecord",
    "JobContext",
    "JobDriver",
    "JobHandle",
    "JobRecord",
    "ManualClock",
    "Relay",
    "RelayStats",
    "RequeueFilter",
    "Retry",
    "Scheduler",
    "SchedulerStats",
    "Settled",
    "StepApi",
    "StepFailedError",
    "StepRecord",
    "StepSuspension",
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
