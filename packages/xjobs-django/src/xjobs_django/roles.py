"""The scheduler and the relay for a Django project's backend: the cron tasks its xjobs App
registers (the retention purge, on by default) fired on the elected leader, and the jobs staged
in Django's transactions (`OPTIONS["outbox"]`) published into their queues."""

from __future__ import annotations

from typing import Unpack

from django.tasks import DEFAULT_TASK_BACKEND_ALIAS

from xjobs import RelayStats, SchedulerStats
from xjobs.roles.relay_options import RelayKwargs
from xjobs.roles.scheduler_options import SchedulerKwargs
from xjobs_django.worker import worker_app


async def run_scheduler(
    alias: str = DEFAULT_TASK_BACKEND_ALIAS,
    *,
    handle_signals: bool | None = None,
    **options: Unpack[SchedulerKwargs],
) -> SchedulerStats:
    """Run a scheduler for `TASKS[alias]` until SIGTERM drains it (or it is stopped): one
    process of the fleet leads and fires each task's occurrences, the others stand by."""
    async with worker_app(alias) as app:
        return await app.run_scheduler(handle_signals=handle_signals, **options)


async def run_relay(
    alias: str = DEFAULT_TASK_BACKEND_ALIAS,
    *,
    until_idle: bool = False,
    handle_signals: bool | None = None,
    **options: Unpack[RelayKwargs],
) -> RelayStats:
    """Publish the jobs staged for `TASKS[alias]` until idle (`until_idle=True`), stopped, or
    SIGTERM drains the relay."""
    async with worker_app(alias) as app:
        return await app.run_relay(until_idle=until_idle, handle_signals=handle_signals, **options)
