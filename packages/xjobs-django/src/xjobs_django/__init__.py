"""xjobs as Django's task backend: `TASKS = {"default": {"BACKEND": "xjobs_django.XJobsBackend", …}}`,
`manage.py xjobs_worker` to run the tasks and `manage.py xjobs_scheduler` to fire the cron tasks
(the retention purge)."""

from __future__ import annotations

from xjobs_django.backend import XJobsBackend
from xjobs_django.roles import run_relay, run_scheduler
from xjobs_django.worker import run_worker, worker_app

__all__ = ["XJobsBackend", "run_relay", "run_scheduler", "run_worker", "worker_app"]
