"""Django's task priority (−100..100, higher first) onto xjobs' order (0..9, lower first)."""

from __future__ import annotations

from django.tasks.base import TASK_MAX_PRIORITY, TASK_MIN_PRIORITY

from xjobs.declare.job import MAX_PRIORITY, MIN_PRIORITY

_SPAN = TASK_MAX_PRIORITY - TASK_MIN_PRIORITY + 1  # 201 Django values
_LEVELS = MAX_PRIORITY - MIN_PRIORITY + 1  # 10 xjobs levels


def xjobs_priority(priority: int) -> int:
    """The xjobs level of a Django priority: 100..80 is 0 (first), −81..−100 is 9 (last), 0 is 4.

    Monotonic: a task of higher Django priority is never claimed after one of lower; tasks whose
    priorities share a level (about 20 Django values each) are claimed by due time, then id.
    """
    return MIN_PRIORITY + (TASK_MAX_PRIORITY - priority) * _LEVELS // _SPAN
