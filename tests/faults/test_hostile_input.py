"""Faults: hostile input through the public API, on memory, Postgres, Redis and SQLite alike.

Each input below goes through `handle.enqueue`, `enqueue_many`, `job()` or `task()` declarations,
or an enqueue option. It must be either

- REFUSED with a stable `XJOBS_*` code (an `XJobsError` subclass) before anything is written — the
  backend's whole namespace (every table of the schema, every key under the prefix, every job the
  memory backend holds) is unchanged; or
- ACCEPTED and round-tripped exactly: a worker runs the job and its body receives an input equal
  to what was sent (same value, same type, same JSON), the record keeps the key and the time it
  was given. A key a worker derives only when it admits the run (a concurrency or rate key) is
  derived at enqueue too, so an underivable one is refused at the door like any other.

The same input gets the same verdict on every backend, and each backend still serves a normal
job afterwards.
"""

from __future__ import annotations

import asyncio
import itertools
import math
import secrets
import shutil
import sqlite3
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import closing
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from pydantic import BaseModel
from redis.asyncio import Redis

import xjobs
from xjobs.errors import XJobsError
from xjobs_pg.backend import asyncpg_dsn
from xjobs_pg.schema import quote_schema
from xjobs_pg.servers import ServerUnavailable, postgres_url, unavailable
from xjobs_redis.servers import ServerUnavailable as RedisUnavailable
from xjobs_redis.servers import redis_url
from xjobs_redis.testing import drop_prefix
from xjobs_sqlite.testing import file_url

from .harness import HOSTILE

BACKENDS = ("memory", "postgres", "redis", "sqlite")
QUEUE = "hostile"

PAYLOAD = "XJOBS_PAYLOAD_INVALID"
INPUT = "XJOBS_INPUT_INVALID"
KEY = "XJOBS_KEY_UNDERIVABLE"
QUEUE_CODE = "XJOBS_QUEUE_INVALID"
NAME = "XJOBS_DECLARATION_INVALID"
OPTION = "XJOBS_OPTION_INVALID"
TZ = "XJOBS_TZ_INVALID"
ACCEPTED = "accepted"

# -- the jobs the inputs go to -----------------------------------------------------------------

RECEIVED: dict[str, BaseModel] = {}  # job id -> the input its body received
VERDICTS: dict[tuple[str, str], str] = {}  # (case, backend) -> the verdict


class Text(BaseModel):
    k: str
    s: str


class Number(BaseModel):
    k: str
    x: float


class Integer(BaseModel):
    k: str
    n: int


class Anything(BaseModel):
    k: str
    value: Any = None


class Raw(BaseModel):
    k: str
    data: bytes


class Typed(BaseModel):
    """Fields whose annotation names what JSON has no type for: the model decodes them back."""

    k: str
    pair: tuple[int, str]
    at: datetime
    tags: frozenset[str]


def by_k(value: Any) -> str:
    return str(value.k)


async def _keep(ctx: xjobs.JobContext, value: BaseModel) -> None:
    RECEIVED[ctx.job_id] = value


@xjobs.job(tenant="none", idempotency_key=by_k, queue=QUEUE)
async def text_job(ctx: xjobs.JobContext, value: Text) -> None:
    await _keep(ctx, value)


@xjobs.job(tenant="none", idempotency_key=by_k, queue=QUEUE)
async def number_job(ctx: xjobs.JobContext, value: Number) -> None:
    await _keep(ctx, value)


@xjobs.job(tenant="none", idempotency_key=by_k, queue=QUEUE)
async def integer_job(ctx: xjobs.JobContext, value: Integer) -> None:
    await _keep(ctx, value)


@xjobs.job(tenant="none", idempotency_key=by_k, queue=QUEUE)
async def anything_job(ctx: xjobs.JobContext, value: Anything) -> None:
    await _keep(ctx, value)


@xjobs.job(tenant="none", idempotency_key=by_k, queue=QUEUE)
async def raw_job(ctx: xjobs.JobContext, value: Raw) -> None:
    await _keep(ctx, value)


@xjobs.job(tenant="none", idempotency_key=by_k, queue=QUEUE)
async def typed_job(ctx: xjobs.JobContext, value: Typed) -> None:
    await _keep(ctx, value)


class Keyed(BaseModel):
    k: str
    ck: str = "slot"
    org: str = "org-1"


# the derived keys hold what the payload must not (so the payload check cannot refuse first)
DERIVED = {"nul": "a\x00b", "1mb": "c" * 1_048_576, "surrogate": "\ud800", "empty": ""}


def derived(text: str) -> str:
    return DERIVED.get(text, text)


@xjobs.job(
    tenant=lambda v: derived(v.org),
    idempotency_key=by_k,
    queue=QUEUE,
    concurrency=xjobs.Concurrency(key=lambda v: derived(v.ck), limit=1),
    retry=xjobs.Retry(attempts=1),
)
async def keyed_job(ctx: xjobs.JobContext, value: Keyed) -> None:
    await _keep(ctx, value)


HANDLES = [text_job, number_job, integer_job, anything_job, raw_job, typed_job, keyed_job]


async def spare_body(ctx: xjobs.JobContext, value: Text) -> None:
    """A body for declarations made inside a case."""


# -- the cases ---------------------------------------------------------------------------------

_keys = itertools.count()


def k() -> str:
    """A fresh idempotency key, so no case dedupes against another."""
    return f"k{next(_keys)}-{secrets.token_hex(3)}"


@dataclass(frozen=True)
class Sent:
    """One accepted job: what the body must receive, and what the record must keep."""

    result: xjobs.EnqueueResult
    expected: BaseModel | None  # None: not due during the test (delayed far away)
    key: str
    run_at_ms: int | None = None


Act = Callable[[], Awaitable[list[Sent]] | object]


@dataclass(frozen=True)
class Case:
    id: str
    act: Act
    expect: str | frozenset[str] | None  # a code, ACCEPTED, codes allowed, or None: any but alike
    xfail: dict[str, str] = field(default_factory=dict)  # backend ("*": all) -> the defect


async def send(
    handle: xjobs.JobHandle[Any], raw: dict[str, Any] | BaseModel, **options: Any
) -> list[Sent]:
    result = await handle.enqueue(raw, **options)
    expected = raw if isinstance(raw, BaseModel) else handle.input_model.model_validate(raw)
    return [Sent(result, expected, handle.key_for(expected))]


async def send_many(handle: xjobs.JobHandle[Any], raws: Sequence[dict[str, Any]]) -> list[Sent]:
    results = await handle.enqueue_many(list(raws))
    sent = []
    for result, raw in zip(results, raws, strict=True):
        expected = handle.input_model.model_validate(raw)
        sent.append(Sent(result, expected, handle.key_for(expected)))
    return sent


def nested(depth: int, leaf: Any = 1) -> Any:
    value = leaf
    for n in range(depth - 1):
        value = [value] if n % 2 else {"d": value}
    return value


def declare(**options: Any) -> Act:
    def act() -> object:
        base: dict[str, Any] = {"tenant": "none", "idempotency_key": by_k}
        return xjobs.job(**{**base, **options})(spare_body)

    return act


def declare_task(**options: Any) -> Act:
    def act() -> object:
        base: dict[str, Any] = {
            "job": text_job,
            "cron": "* * * * *",
            "tz": "UTC",
            "input": lambda at: Text(k=at.isoformat(), s="tick"),
        }
        return xjobs.task(**{**base, **options})

    return act


ODD_NAMES = {
    "empty": "",
    "129 chars": "q" * 129,
    "colon a:b": "a:b",
    "braces {x}": "{x}",
    "star *": "*",
    "newline": "a\nb",
    "quotes": "a'b\"c",
    "dot-dot-slash ../x": "../x",
    "Cyrillic look-alike dеfault": "d\u0435fault",
    "fullwidth look-alike ｄefault": "\uff44efault",
    "space": "a b",
    "NUL": "a\x00b",
}
ODD_KEYS = [
    "a:b",
    "{x}",
    "*",
    "a\nb",
    "'\"; drop table jobs; --",
    "../../etc/passwd",
    "d\u0435fault",
    "\uff44efault",
    "\u200b",
    "🙂",
]
FAR_FUTURE = datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC)
PAST = datetime(2000, 1, 1, tzinfo=UTC)
MB = 1_048_576


def cases() -> list[Case]:
    c: list[Case] = [
        # sizes
        Case("payload 2 MB", lambda: send(text_job, {"k": k(), "s": "x" * (2 * MB)}), PAYLOAD),
        Case(
            "payload 1,000,000 chars (under the limit)",
            lambda: send(text_job, {"k": k(), "s": "x" * 1_000_000}),
            ACCEPTED,
        ),
        Case(
            "payload 1 MB of 4-byte characters",
            lambda: send(text_job, {"k": k(), "s": "🙂" * (MB // 4)}),
            PAYLOAD,
        ),
        # nesting
        Case(
            "nesting 10 levels",
            lambda: send(anything_job, {"k": k(), "value": nested(10)}),
            ACCEPTED,
        ),
        Case(
            "nesting 300 levels",
            lambda: send(anything_job, {"k": k(), "value": nested(300)}),
            PAYLOAD,
        ),
        Case(
            "nesting 10,000 levels",
            lambda: send(anything_job, {"k": k(), "value": nested(10_000)}),
            frozenset({PAYLOAD, INPUT}),
        ),
        # numbers
        Case("NaN", lambda: send(number_job, {"k": k(), "x": math.nan}), PAYLOAD),
        Case("+inf", lambda: send(number_job, {"k": k(), "x": math.inf}), PAYLOAD),
        Case("-inf", lambda: send(number_job, {"k": k(), "x": -math.inf}), PAYLOAD),
        Case(
            "NaN inside Any",
            lambda: send(anything_job, {"k": k(), "value": {"a": [1.0, math.nan]}}),
            PAYLOAD,
        ),
        Case(
            "inf inside Any", lambda: send(anything_job, {"k": k(), "value": [math.inf]}), PAYLOAD
        ),
        Case(
            "NaN as the string 'nan'",
            lambda: send(number_job, {"k": k(), "x": "nan"}),
            frozenset({PAYLOAD, INPUT}),
        ),
        Case(
            "-0.0 in a float field",
            lambda: send(number_job, {"k": k(), "x": -0.0}),
            ACCEPTED,
        ),
        Case(
            "5e-324 and 1.7976931348623157e308 in a float field",
            lambda: send_many(
                number_job, [{"k": k(), "x": 5e-324}, {"k": k(), "x": 1.7976931348623157e308}]
            ),
            ACCEPTED,
        ),
        Case(
            "floats inside Any (1e300, -0.0, 0.1)",
            lambda: send(anything_job, {"k": k(), "value": [1e300, -0.0, 0.1]}),
            ACCEPTED,
        ),
        Case(
            "floats printed with an exponent inside Any (1e16, 5e-324, -1.5e-7)",
            lambda: send(anything_job, {"k": k(), "value": {"a": 1e16, "b": [5e-324, -1.5e-7]}}),
            ACCEPTED,
        ),
        Case(
            "integer of 5,000 digits", lambda: send(integer_job, {"k": k(), "n": 10**4999}), PAYLOAD
        ),
        Case(
            "integer of 5,000 digits inside Any",
            lambda: send(anything_job, {"k": k(), "value": {"n": 10**4999}}),
            PAYLOAD,
        ),
        Case(
            "integer of 3,000 digits",
            lambda: send(integer_job, {"k": k(), "n": 7 * 10**2999}),
            ACCEPTED,
        ),
        Case("integer 2**64 + 1", lambda: send(integer_job, {"k": k(), "n": 2**64 + 1}), ACCEPTED),
        # bytes and strings
        Case(
            "non-UTF-8 bytes", lambda: send(raw_job, {"k": k(), "data": b"\xff\xfe\x00"}), PAYLOAD
        ),
        Case(
            "non-UTF-8 bytes inside Any",
            lambda: send(anything_job, {"k": k(), "value": {"b": b"\xc3\x28"}}),
            PAYLOAD,
        ),
        Case("UTF-8 bytes", lambda: send(raw_job, {"k": k(), "data": "café".encode()}), ACCEPTED),
        Case("NUL in a value", lambda: send(text_job, {"k": k(), "s": "a\x00b"}), PAYLOAD),
        Case(
            "NUL in a key of a mapping",
            lambda: send(anything_job, {"k": k(), "value": {"a\x00": 1}}),
            PAYLOAD,
        ),
        Case("NUL in the idempotency key", lambda: send(text_job, {"k": "a\x00b", "s": "x"}), KEY),
        Case(
            "lone surrogate in a value",
            lambda: send(text_job, {"k": k(), "s": "a\ud800b"}),
            PAYLOAD,
        ),
        Case(
            "lone surrogate in a mapping key",
            lambda: send(anything_job, {"k": k(), "value": {"\udfff": 1}}),
            PAYLOAD,
        ),
        Case(
            "lone surrogate in the idempotency key",
            lambda: send(text_job, {"k": "\ud800", "s": "x"}),
            KEY,
        ),
        Case(
            "unicode: emoji, RTL, combining, zero-width",
            lambda: send(text_job, {"k": k(), "s": "🙂\u202e\u0301\u200b\ufeff"}),
            ACCEPTED,
        ),
        # keys
        Case("idempotency key of 1 MB", lambda: send(text_job, {"k": "k" * MB, "s": "x"}), KEY),
        Case(
            "idempotency key of 513 chars", lambda: send(text_job, {"k": "k" * 513, "s": "x"}), KEY
        ),
        Case(
            "idempotency key of 512 chars",
            lambda: send(text_job, {"k": secrets.token_hex(256), "s": "x"}),
            ACCEPTED,
        ),
        Case("empty idempotency key", lambda: send(text_job, {"k": "", "s": "x"}), KEY),
        Case(
            "odd idempotency keys (a:b, {x}, *, newline, quotes, ../, look-alikes, emoji)",
            lambda: send_many(text_job, [{"k": key, "s": key} for key in ODD_KEYS]),
            ACCEPTED,
        ),
        Case("NUL in the concurrency key", lambda: send(keyed_job, {"k": k(), "ck": "nul"}), KEY),
        Case("concurrency key of 1 MB", lambda: send(keyed_job, {"k": k(), "ck": "1mb"}), KEY),
        Case(
            "lone surrogate in the concurrency key",
            lambda: send(keyed_job, {"k": k(), "ck": "surrogate"}),
            KEY,
        ),
        Case("empty concurrency key", lambda: send(keyed_job, {"k": k(), "ck": "empty"}), KEY),
        Case(
            "odd concurrency key (a:b {x} * newline ../ look-alike)",
            lambda: send(keyed_job, {"k": k(), "ck": "a:b {x} * \n ../ d\u0435fault"}),
            ACCEPTED,
        ),
        Case("NUL in the tenant", lambda: send(keyed_job, {"k": k(), "org": "nul"}), KEY),
        Case("tenant of 1 MB", lambda: send(keyed_job, {"k": k(), "org": "1mb"}), KEY),
        Case(
            "lone surrogate in the tenant",
            lambda: send(keyed_job, {"k": k(), "org": "surrogate"}),
            KEY,
        ),
        Case("empty tenant", lambda: send(keyed_job, {"k": k(), "org": "empty"}), KEY),
        # the model
        Case(
            "unknown fields",
            lambda: send(text_job, {"k": k(), "s": "x", "extra": 1, "__proto__": {}}),
            ACCEPTED,
        ),
        Case("wrong type", lambda: send(text_job, {"k": k(), "s": 5}), INPUT),
        Case("missing field", lambda: send(text_job, {"k": k()}), INPUT),
        Case("not a mapping", lambda: send(text_job, ["k", "s"]), INPUT),  # type: ignore[arg-type]
        Case(
            "an arbitrary object inside Any",
            lambda: send(anything_job, {"k": k(), "value": object()}),
            PAYLOAD,
        ),
        Case(
            "a set inside Any",
            lambda: send(anything_job, {"k": k(), "value": {1, 2}}),
            PAYLOAD,
        ),
        Case(
            "a tuple inside Any",
            lambda: send(anything_job, {"k": k(), "value": (1, "a")}),
            PAYLOAD,
        ),
        Case(
            "a datetime inside Any",
            lambda: send(anything_job, {"k": k(), "value": {"at": PAST}}),
            PAYLOAD,
        ),
        Case(
            "a mapping with int keys inside Any",
            lambda: send(anything_job, {"k": k(), "value": {1: "a"}}),
            PAYLOAD,
        ),
        Case(
            "a model inside Any",
            lambda: send(anything_job, {"k": k(), "value": Text(k="in", s="side")}),
            PAYLOAD,
        ),
        Case(
            "a tuple, a datetime and a frozenset in fields typed so",
            lambda: send(
                typed_job,
                {"k": k(), "pair": (1, "a"), "at": PAST, "tags": frozenset({"x", "y"})},
            ),
            ACCEPTED,
        ),
        Case(
            "enqueue_many: two good, one NUL",
            lambda: send_many(
                text_job, [{"k": k(), "s": "a"}, {"k": k(), "s": "b"}, {"k": k(), "s": "\x00"}]
            ),
            PAYLOAD,
        ),
        Case(
            "enqueue_many: two good, one wrong type",
            lambda: send_many(
                text_job, [{"k": k(), "s": "a"}, {"k": k(), "s": 1}, {"k": k(), "s": "b"}]
            ),
            INPUT,
        ),
        # times and options
        Case(
            "run_at in the past",
            lambda: send(text_job, {"k": k(), "s": "x"}, run_at=PAST),
            ACCEPTED,
        ),
        Case(
            "run_at far in the future (9999-12-31)", lambda: send_far(run_at=FAR_FUTURE), ACCEPTED
        ),
        Case(
            "run_at naive",
            lambda: send(text_job, {"k": k(), "s": "x"}, run_at=datetime(2030, 1, 1)),
            OPTION,
        ),
        Case(
            "delay negative",
            lambda: send(text_job, {"k": k(), "s": "x"}, delay=timedelta(seconds=-1)),
            OPTION,
        ),
        Case(
            "delay zero", lambda: send(text_job, {"k": k(), "s": "x"}, delay=timedelta(0)), ACCEPTED
        ),
        Case("delay timedelta.max", lambda: send_far(delay=timedelta.max), OPTION),
        Case("delay 1e300 seconds", lambda: send_far(delay=1e300), OPTION),
        Case("delay past 9999-12-31", lambda: send_far(delay=timedelta(days=3_000_000)), OPTION),
        Case(
            "run_at before the epoch",
            lambda: send(text_job, {"k": k(), "s": "x"}, run_at=datetime(1969, 12, 31, tzinfo=UTC)),
            OPTION,
        ),
        Case(
            "delay and run_at together",
            lambda: send(text_job, {"k": k(), "s": "x"}, delay=timedelta(0), run_at=PAST),
            OPTION,
        ),
        Case("priority -1", lambda: send(text_job, {"k": k(), "s": "x"}, priority=-1), OPTION),
        Case("priority 10", lambda: send(text_job, {"k": k(), "s": "x"}, priority=10), OPTION),
        Case(
            "priority NaN", lambda: send(text_job, {"k": k(), "s": "x"}, priority=math.nan), OPTION
        ),
        Case("priority True", lambda: send(text_job, {"k": k(), "s": "x"}, priority=True), OPTION),
        Case("job timeout zero", declare(timeout=timedelta(0)), OPTION),
        Case("job timeout negative", declare(timeout=timedelta(seconds=-1)), OPTION),
        Case("job priority -1", declare(priority=-1), OPTION),
        Case("retry attempts 0", lambda: xjobs.Retry(attempts=0), OPTION),
        Case("retry attempts -1", lambda: xjobs.Retry(attempts=-1), OPTION),
        Case("retry base negative", lambda: xjobs.Retry(base=timedelta(seconds=-1)), OPTION),
        Case("task max_catch_up 0", declare_task(max_catch_up=0), OPTION),
        Case("task tz of 10,000 chars", declare_task(tz="A" * 10_000), TZ),
        Case("task tz ../../etc/passwd", declare_task(tz="../../etc/passwd"), TZ),
        Case("task tz Mars/Olympus_Mons", declare_task(tz="Mars/Olympus_Mons"), TZ),
        Case("task tz with NUL", declare_task(tz="Europe/Paris\x00"), TZ),
    ]
    for label, name in ODD_NAMES.items():
        c.append(Case(f"queue name: {label}", declare(queue=name), QUEUE_CODE))
        c.append(Case(f"job name: {label}", declare(name=name), NAME))
        c.append(Case(f"task name: {label}", declare_task(name=name), NAME))
    c.append(Case("queue name: 80 chars (the limit)", declare(queue="q" * 80), ACCEPTED))
    c.append(Case("queue name: 81 chars", declare(queue="q" * 81), QUEUE_CODE))
    c.append(Case("job name: 128 chars (the limit)", declare(name="j" * 128), ACCEPTED))
    return c


async def send_far(**options: Any) -> list[Sent]:
    """A job delayed beyond the test: its record must keep the time it was given."""
    value = Text(k=k(), s="later")
    before = time.time_ns() // 1_000_000
    result = await text_job.enqueue(value, **options)
    if "run_at" in options:
        at = int(options["run_at"].timestamp() * 1000)
    else:
        at = before + options["delay"] // timedelta(milliseconds=1)
    return [Sent(result, None, value.k, at)]


CASES = cases()


def params() -> Iterator[Any]:
    for case in CASES:
        for backend in BACKENDS:
            reason = case.xfail.get(backend) or case.xfail.get("*")
            marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
            yield pytest.param(case, backend, id=f"{case.id}-{backend}", marks=marks)


# -- the backends ------------------------------------------------------------------------------


@dataclass
class Namespace:
    backend: str
    url: str
    schema: str = ""
    prefix: str = ""
    server: str = ""


@pytest.fixture(scope="module")
def namespaces() -> Iterator[dict[str, Namespace]]:
    """One schema and one key prefix for the whole matrix (dropped after)."""
    try:
        pg = postgres_url()
    except ServerUnavailable as exc:
        unavailable(f"no Postgres server for the hostile input matrix: {exc}")
    try:
        redis = redis_url()
    except RedisUnavailable as exc:
        unavailable(f"no Redis server for the hostile input matrix: {exc}")
    schema, prefix = f"xjobs_t_{secrets.token_hex(6)}", f"xjobs_t_{secrets.token_hex(6)}"
    directory = Path(tempfile.mkdtemp(prefix="xjobs-hostile-"))
    found = {
        "memory": Namespace("memory", "memory://"),
        "postgres": Namespace("postgres", f"{pg}?xjobs_schema={schema}", schema=schema, server=pg),
        "redis": Namespace("redis", f"{redis}?xjobs_prefix={prefix}", prefix=prefix, server=redis),
        "sqlite": Namespace("sqlite", file_url(directory / "hostile.db"), server=str(directory)),
    }
    try:
        yield found
        asyncio.run(_drop(found))
    finally:
        shutil.rmtree(directory, ignore_errors=True)


async def _drop(found: dict[str, Namespace]) -> None:
    pg, redis = found["postgres"], found["redis"]
    conn = await asyncpg.connect(asyncpg_dsn(pg.server)[0])
    try:
        await conn.execute(f"drop schema if exists {quote_schema(pg.schema)} cascade")
    finally:
        await conn.close()
    client = Redis.from_url(redis.server)
    try:
        await drop_prefix(client, redis.prefix)
    finally:
        await client.aclose()


async def snapshot(app: xjobs.App, space: Namespace) -> object:
    """Everything the backend holds in this namespace, to compare before and after."""
    if space.backend == "postgres":
        conn = await asyncpg.connect(asyncpg_dsn(space.server)[0])
        try:
            tables = await conn.fetch(
                "select table_name from information_schema.tables where table_schema = $1",
                space.schema,
            )
            counts = {}
            for row in tables:
                table = f"{quote_schema(space.schema)}.{quote_schema(row['table_name'])}"
                counts[row["table_name"]] = await conn.fetchval(f"select count(*) from {table}")
            return counts
        finally:
            await conn.close()
    if space.backend == "sqlite":
        return sqlite_counts(Path(space.server) / "hostile.db")
    if space.backend == "redis":
        client = Redis.from_url(space.server, decode_responses=False)
        try:
            keys = sorted([key async for key in client.scan_iter(match=f"{space.prefix}:*")])
            return {key: await client.dump(key) for key in keys}
        finally:
            await client.aclose()
    page = await app.operator.list_jobs(limit=500)
    return sorted((job.id, job.state) for job in page.jobs)


def sqlite_counts(path: Path) -> dict[str, int]:
    """How many rows each table of the SQLite file holds."""
    with closing(sqlite3.connect(path)) as db:
        names = sorted(
            r[0] for r in db.execute("select name from sqlite_master where type = 'table'")
        )
        return {name: db.execute(f'select count(*) from "{name}"').fetchone()[0] for name in names}


# -- the matrix --------------------------------------------------------------------------------


def verdict_of(error: BaseException | None) -> str:
    if error is None:
        return ACCEPTED
    if isinstance(error, XJobsError):
        return error.code
    return f"UNCODED {type(error).__name__}: {str(error)[:80]}"


def expected_text(expect: str | frozenset[str] | None) -> str:
    if expect is None:
        return "any stable verdict, alike on every backend"
    return expect if isinstance(expect, str) else " or ".join(sorted(expect))


def matches(verdict: str, expect: str | frozenset[str] | None) -> bool:
    if expect is None:
        return not verdict.startswith("UNCODED")
    return verdict == expect if isinstance(expect, str) else verdict in expect


async def check_round_trip(app: xjobs.App, sent: list[Sent]) -> list[str]:
    problems = []
    if any(s.expected is not None for s in sent):
        await app.run_worker(until_idle=True)
    for s in sent:
        record = await app.get_job(s.result.job_id)
        if record.idempotency_key != s.key:
            problems.append(
                f"the key came back as {record.idempotency_key!r:.80}, not {s.key!r:.80}"
            )
        try:
            await app.operator.get_job(s.result.job_id)  # an operator can look at it
        except Exception as exc:
            problems.append(f"the operator cannot show the job: {exc!r:.200}")
        if s.expected is None:
            # at most the enqueue's own duration late, and a Redis score's rounding (16 ms at 2**56)
            assert s.run_at_ms is not None
            if not s.run_at_ms - 32 <= record.run_at_ms <= s.run_at_ms + 2_000:
                problems.append(f"run_at came back as {record.run_at_ms}, not {s.run_at_ms}")
            continue
        got = RECEIVED.get(s.result.job_id)
        if record.state != "completed":
            problems.append(f"the job ended {record.state}: {record.last_error!s:.300}")
        elif got != s.expected or not identical(got.model_dump(), s.expected.model_dump()):
            problems.append(f"the body received {got!r:.200}, not {s.expected!r:.200}")
    return problems


def identical(a: object, b: object) -> bool:
    """Equal and of one type all the way down: 1, 1.0 and True differ, a tuple is no list. A set
    is compared member by member, not in the order its members' hashes lay it out (the hash seed
    differs per process, so two equal sets may dump their members in two orders)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(identical(a[key], b[key]) for key in a)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(identical(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, set | frozenset) and isinstance(b, set | frozenset):
        return len(a) == len(b) and all(any(identical(x, y) for y in b) for x in a)
    return bool(a == b)


@pytest.mark.parametrize(("case", "backend"), list(params()))
@pytest.mark.asyncio
async def test_hostile_input(case: Case, backend: str, namespaces: dict[str, Namespace]) -> None:
    space = namespaces[backend]
    problems: list[str] = []
    async with xjobs.App(space.url, jobs=HANDLES) as app:
        before = await snapshot(app, space)
        error: BaseException | None = None
        sent: object = None
        try:
            sent = case.act()
            if asyncio.iscoroutine(sent):
                sent = await sent
        except Exception as exc:
            error = exc
        verdict = verdict_of(error)
        VERDICTS[(case.id, backend)] = verdict.split(":")[0]
        known = case.xfail.get(backend) or case.xfail.get("*")
        HOSTILE[(case.id, backend)] = VERDICTS[(case.id, backend)] + (
            " (defect: xfail)" if known else ""
        )
        if verdict != ACCEPTED:
            if await snapshot(app, space) != before:
                problems.append("it was refused, but something was written")
        elif isinstance(sent, list):
            problems += await check_round_trip(app, sent)
    if not matches(verdict, case.expect):
        problems.insert(0, f"verdict {verdict}, expected {expected_text(case.expect)}")
    assert not problems, f"{case.id} on {backend}: " + "; ".join(problems)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.asyncio
async def test_the_verdicts_agree_and_the_backend_still_serves_a_normal_job(
    backend: str, namespaces: dict[str, Namespace]
) -> None:
    async with xjobs.App(namespaces[backend].url, jobs=HANDLES) as app:
        value = Text(k=k(), s="a normal job")
        result = await text_job.enqueue(value)
        await app.run_worker(until_idle=True)
        assert (await app.get_job(result.job_id)).state == "completed"
        assert RECEIVED[result.job_id] == value
    ran = {case for case, b in VERDICTS if b == backend}
    split = {
        case: {b: VERDICTS.get((case, b)) for b in BACKENDS}
        for case in ran
        if len({VERDICTS[(case, b)] for b in BACKENDS if (case, b) in VERDICTS}) > 1
    }
    assert not split, f"the backends disagree: {split}"
