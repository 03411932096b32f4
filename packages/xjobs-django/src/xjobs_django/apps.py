"""The Django application `xjobs_django`: what `INSTALLED_APPS` names for the management commands."""

from __future__ import annotations

from django.apps import AppConfig


class XJobsConfig(AppConfig):
    """`INSTALLED_APPS += ["xjobs_django"]` brings `manage.py xjobs_worker` and `xjobs_install`."""

    name = "xjobs_django"
    verbose_name = "xjobs"
