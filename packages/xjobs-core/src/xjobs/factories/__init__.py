"""Factories: functions that return a `JobHandle` built with `job()` and durable steps, nothing else."""

from xjobs.factories.backfill import BackfillInput, backfill
from xjobs.factories.backfill_gate import current_environment, gate_backfill
from xjobs.factories.backfill_pass import Page
from xjobs.factories.backfill_registry import backfill_spec, is_backfill, registered_backfills
from xjobs.factories.export_rows import ExportInput, export_rows
from xjobs.factories.sinks import DirectorySink, Sink
from xjobs.factories.webhook import Endpoint, WebhookEvent, webhook
from xjobs.factories.webhook_sign import WebhookSignatureError, new_secret, verify

__all__ = [
    "BackfillInput",
    "DirectorySink",
    "Endpoint",
    "ExportInput",
    "Page",
    "Sink",
    "WebhookEvent",
    "WebhookSignatureError",
    "backfill",
    "backfill_spec",
    "current_environment",
    "export_rows",
    "gate_backfill",
    "is_backfill",
    "new_secret",
    "registered_backfills",
    "verify",
    "webhook",
]
