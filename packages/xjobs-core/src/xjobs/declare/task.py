"""The `task()` primitive: a cron expression in an IANA zone that fires a job with an input built from the occurrence."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import CroniterBadDateError, croniter
from pydantic import BaseModel

from xjobs.contract.driver import EnqueueResult
from xjobs.declare.job import JobHandle
from xjobs.declare.occurrences import next_after, to_datetime, to_ms
from xjobs.errors import (
    CronInvalidError,
    DeclarationInvalidError,
    JobDuplicateError,
    TimeZoneInvalidError,
)
from xjobs.names import validate_job_name
from xjobs.options import finite_count

CatchUp = Literal["latest", "skip", "all"]
CRON_MACROS = frozenset(
    {"@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly"}
)
MAX_CATCH_UP = 10_000


def validate_cron(expression: object) -> str:
    """A five-field cron expression (or a macro such as `@daily`) that matches at least once."""
    if not isinstance(expression, str) or not expression.strip():
        raise CronInvalidError(
            f"cron must be a non-empty five-field expression, got {expression!r}"
        )
    text = " ".join(expression.split())
    if text not in CRON_MACROS and len(text.split(" ")) != 5:
        raise CronInvalidError(
            f"cron {expression!r} must have five fields (minute hour day month weekday)"
        )
    if not croniter.is_valid(text):
        raise CronInvalidError(f"cron {expression!r} does not parse")
    try:
        croniter(text, datetime(2000, 1, 1, tzinfo=UTC)).get_next(datetime)
    except CroniterBadDateError as exc:
        raise CronInvalidError(f"cron {expression!r} never matches a date") from exc
    return text


def validate_tz(tz: object) -> ZoneInfo:
    """An IANA zone name, required (`XJOBS_TZ_INVALID` when missing or unknown)."""
    if not isinstance(tz, str) or not tz:
        raise TimeZoneInvalidError(
            f"tz is required: an IANA zone name such as 'Europe/Paris', got {tz!r}"
        )
    try:
        return ZoneInfo(tz)
    except (ZoneInfoNotFoundError, ValueError, OSError) as exc:
        # An overlong or odd name reaches the file system as a path (`OSError`): refused alike.
        raise TimeZoneInvalidError(f"tz {tz[:80]!r} is not an IANA time zone") from exc


class TaskHandle:
    """One declared cron task: which job it fires, when, in which zone, and how it catches up."""

    __slots__ = (
        "_name",
        "catch_up",
        "cron",
        "declared_name",
        "input",
        "job",
        "max_catch_up",
        "tz",
        "zone",
    )

    def __init__(
        self,
        *,
        job: JobHandle[Any],
        cron: str,
        tz: str,
        zone: ZoneInfo,
        input: Callable[[datetime], BaseModel | dict[str, Any]],
        catch_up: CatchUp,
        max_catch_up: int,
        declared_name: str | None,
    ) -> None:
        self.job = job
        self.cron = cron
        self.tz = tz
        self.zone = zone
        self.input = input
        self.catch_up = catch_up
        self.max_catch_up = max_catch_up
        self.declared_name = declared_name
        self._name: str | None = declared_name

    @property
    def name(self) -> str:
        """The durable name: `name=` if declared, else the attribute its module exports it under."""
        return self._name if self._name is not None else f"task.{self.job.name}"

    @property
    def stamped(self) -> bool:
        """Whether the task has its durable name (declared, or stamped by its registration)."""
        return self._name is not None

    def stamp(self, name: str) -> None:
        """Give the task its registered name, once; a second, different name is a duplicate."""
        validate_job_name(name, what="task")
        if self._name is None:
            self._name = name
        elif self._name != name:
            raise JobDuplicateError(
                f"one task handle is registered as both {self._name!r} and {name!r}"
            )

    def next_occurrence(self, after: datetime) -> datetime:
        """The first occurrence strictly after `after`, in the task's zone (DST rules in `occurrences`)."""
        return to_datetime(next_after(self.cron, self.zone, to_ms(after)), self.zone)

    def local_time(self, epoch_ms: int) -> datetime:
        """An instant (an occurrence, a watermark) as an aware datetime in the task's zone."""
        return to_datetime(epoch_ms, self.zone)

    def input_for(self, occurrence: datetime) -> BaseModel | dict[str, Any]:
        """The job input this occurrence builds."""
        return self.input(occurrence.astimezone(self.zone))

    async def enqueue(self, occurrence: datetime | None = None) -> EnqueueResult:
        """A manual run now: the input built for `occurrence` (default: now), with the job's plain key.

        It goes through the job's `enqueue`, so a live job with the same key dedupes it; the
        task's watermark and `task_fires()` are untouched.
        """
        return await self.job.enqueue(self.input_for(occurrence or datetime.now(UTC)))

    def __repr__(self) -> str:
        return f"<TaskHandle {self.name} cron={self.cron!r} tz={self.tz}>"


def task(
    *,
    job: JobHandle[Any],
    cron: str,
    tz: str,
    input: Callable[[datetime], BaseModel | dict[str, Any]],
    catch_up: CatchUp = "latest",
    max_catch_up: int = 100,
    name: str | None = None,
) -> TaskHandle:
    """Declare a cron task firing `job`; cron, tz and catch-up are validated here, once."""
    if not isinstance(job, JobHandle):
        raise DeclarationInvalidError(
            f"task(job=...) must be a job handle built with job(), got {job!r}"
        )
    if not callable(input):
        raise DeclarationInvalidError(
            "task(input=...) must be a callable (occurrence -> job input)"
        )
    if catch_up not in ("latest", "skip", "all"):
        raise DeclarationInvalidError(
            f"task catch_up must be 'latest', 'skip' or 'all', got {catch_up!r}"
        )
    if name is not None:
        validate_job_name(name, what="task")
    return TaskHandle(
        job=job,
        cron=validate_cron(cron),
        tz=tz,
        zone=validate_tz(tz),
        input=input,
        catch_up=catch_up,
        max_catch_up=finite_count("max_catch_up", max_catch_up, minimum=1, maximum=MAX_CATCH_UP),
        declared_name=name,
    )
