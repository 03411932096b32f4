"""A small shop: its database (SQLite, a file shared with the worker processes) and xjobs as the
task backend, both named by the environment a test sets."""

import os
from pathlib import Path

SECRET_KEY = "tests-only"
DEBUG = False
ALLOWED_HOSTS = ["testserver", "localhost"]
INSTALLED_APPS = ["xjobs_django", "shop"]
MIDDLEWARE: list[str] = []
ROOT_URLCONF = "djproject.urls"
USE_TZ = True
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": os.environ.get("SHOP_DB", str(Path(__file__).resolve().parent / "shop.sqlite3")),
        "OPTIONS": {"timeout": 20},
    }
}
TASKS = {
    "default": {
        "BACKEND": "xjobs_django.XJobsBackend",
        "QUEUES": ["default", "emails"],
        "OPTIONS": {"url": os.environ.get("SHOP_XJOBS_URL", "postgresql://localhost/shop")},
    }
}
