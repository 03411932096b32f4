"""The shop's one model."""

from __future__ import annotations

from django.db import models


class Order(models.Model):
    """An order: its total, and whether the `mark_paid` task has run for it."""

    total_cents: models.IntegerField[int, int] = models.IntegerField()
    paid: models.BooleanField[bool, bool] = models.BooleanField(default=False)
