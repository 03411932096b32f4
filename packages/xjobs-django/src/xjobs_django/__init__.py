"""xjobs as Django's task backend: `TASKS = {"default": {"BACKEND": "xjobs_django.XJobsBackend", …}}`,
and `manage.py xjobs_worker` to run the tasks."""

from __future__ import annotations

from xjobs_django.backend import XJobsBackend
from xjobs_django.worker import run_worker, worker_app

__all__ = ["XJobsBackend", "run_worker", "worker_app"]
