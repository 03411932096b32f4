"""The idle cost budget on Redis (semantics.md, "The worker" and the idle budget): commands an idle worker sends.

With the wake proven live (a pub/sub subscription an enqueue publishes to), an idle worker polls
at the 5 s ceiling: 12 idle passes a minute. Each pass is ONE claim round trip: a pipeline of one `EVALSHA claim` per served queue
plus the `EVALSHA worker_beat` of the registry presence refresh that rides it. So the budget
pinned here is, per idle minute,

    commands sent <= (12 passes + 1 pass of slack) x (served queues + 1)

— 26 for one queue, 39 for two — where the slack is the pass a counting window's edge may catch
(the same +1 as the Postgres test). Rather than sleeping a minute, the test lets the backoff climb
from its floor to the 5 s ceiling, counts a window of three whole ceilings (15 s), and scales.
The subscription itself sends nothing while idle: it only reads.

How the commands are counted, honestly: `INFO commandstats` deltas, server-wide, on the shared
test server (a pytest session runs one test at a time, so the idle worker is the only other
client sending anything during the window; a stray client would only make the figure worse).

- `commandstats` counts every command the server EXECUTES, including each `redis.call` a Lua
  script makes (Redis 7 books them under their own names: an `EVALSHA claim` on an empty queue
  also books a `TIME`, two `ZRANGEBYSCORE` and a `ZRANGE`). Those are not round trips, so the
  delta is split: SENT = the script calls (`EVALSHA`/`EVAL`/`SCRIPT`/...) plus every command no
  xjobs script can call (the names are read from `lua/*.lua`); the rest is IN-SCRIPT work. The
  budget pins SENT. As a cross-check that nothing hides among the in-script names, the TOTAL
  executed is pinned too, against one idle pass measured the same way (below).
- The measuring connection sends nothing but `INFO commandstats` (it is opened, and has sent its
  handshake, before the first snapshot). A snapshot does not count itself, so the delta between
  two snapshots holds exactly one `INFO`: the first snapshot's. The test asserts that (no one
  else sent `INFO`) and takes it out.
- One idle pass is measured by a claim through the public driver API with the options the worker
  uses (its queues and slots, lease, presence TTL, limit), for a registry row that exists — an
  idle pass to the command. It pins the pass's shape: exactly `served queues + 1` commands sent.
"""

from __future__ import annotations

import asyncio
import re
import secrets
import time
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass
from importlib import resources

import pytest
import pytest_asyncio
from pydantic import BaseModel
from redis.asyncio import Redis

import xjobs
from xjobs.contract.backend import Backend
from xjobs.contract.driver import ClaimOptions
from xjobs.contract.stores import WorkerInfo
from xjobs.roles.idle_wait import CEILING_WITH_WAKE_MS
from xjobs.roles.worker_options import DEFAULT_POLL_FLOOR
from xjobs_redis.backend import open_backend
from xjobs_redis.servers import ServerUnavailable, redis_url, unavailable
from xjobs_redis.testing import drop_prefix

BUDGET_PASSES = 12  # idle claim round trips per minute: the worker's budget with the wake live
SLACK_PASSES = 1  # the pass a window's edge may catch
WINDOW_S = 15.0  # three ceilings of 5 s
LIVE_WITHIN_S = 10.0
WARM_UP_MARGIN_S = 1.0
CONCURRENCY = 10
# Commands a client sends to run a script; each is one command of a round trip, whatever it runs.
SCRIPT_COMMANDS = frozenset(
    {"eval", "evalsha", "eval_ro", "evalsha_ro", "fcall", "fcall_ro", "script|load"}
)
MEASURING = "info"  # the only command the measuring connection sends


class Nothing(BaseModel):
    key: str = "k"


@xjobs.job(tenant="none", idempotency_key=lambda i: i.key, queue="idle-a")
async def idle_a(ctx: xjobs.JobContext, input: Nothing) -> None:
    """Registered so the worker serves its queue; no test enqueues it."""


@xjobs.job(tenant="none", idempotency_key=lambda i: i.key, queue="idle-b")
async def idle_b(ctx: xjobs.JobContext, input: Nothing) -> None:
    """A second queue: each served queue costs one EVALSHA a pass."""


def in_script_names() -> frozenset[str]:
    """Every command name some xjobs Lua script calls (lower case, as commandstats names them)."""
    folder = resources.files("xjobs_redis").joinpath("lua")
    found: set[str] = set()
    for entry in folder.iterdir():
        if entry.name.endswith(".lua"):
            text = entry.read_text("utf-8")
            found.update(m.lower() for m in re.findall(r"redis\.p?call\('([A-Za-z]+)'", text))
    return frozenset(found)


IN_SCRIPT = in_script_names()


async def commandstats(conn: Redis) -> Counter[str]:
    """Commands the server received, by name: executed (`calls`) plus refused (`rejected_calls`)."""
    info = await conn.info("commandstats")
    return Counter(
        {
            str(name).removeprefix("cmdstat_"): int(s["calls"]) + int(s.get("rejected_calls", 0))
            for name, s in info.items()
        }
    )


@dataclass(frozen=True)
class Counted:
    """One commandstats window, the measuring connection's own INFO taken out."""

    by_name: Counter[str]

    @property
    def sent(self) -> int:
        """Commands a client sent: script calls and every command no script could have run."""
        return sum(n for c, n in self.by_name.items() if c in SCRIPT_COMMANDS or c not in IN_SCRIPT)

    @property
    def in_script(self) -> int:
        return self.total - self.sent

    @property
    def total(self) -> int:
        return sum(self.by_name.values())


async def count(conn: Redis, before: Counter[str]) -> Counted:
    """The delta since `before`, less the one INFO snapshot `before` itself was."""
    delta = await commandstats(conn)
    delta.subtract(before)
    delta = Counter({name: n for name, n in delta.items() if n})
    assert delta[MEASURING] == 1, f"another client sent INFO during the window: {dict(delta)}"
    del delta[MEASURING]
    return Counted(delta)


@dataclass
class Idle:
    url: str
    prefix: str
    backend: Backend
    meter: Redis


@pytest_asyncio.fixture
async def idle() -> AsyncIterator[Idle]:
    try:
        url = redis_url()
    except ServerUnavailable as exc:
        unavailable(f"no Redis server for the idle budget: {exc}")
    prefix = f"xjobs_t_{secrets.token_hex(6)}"
    meter = Redis.from_url(url, decode_responses=True, single_connection_client=True)
    await meter.ping()  # the handshake happens now, before any snapshot
    backend = await open_backend(url, prefix=prefix)
    try:
        yield Idle(url, prefix, backend, meter)
    finally:
        await backend.close()
        await drop_prefix(meter, prefix)
        await meter.aclose()


def warm_up_s(floor_ms: int, ceiling_ms: int) -> float:
    """How long an idle loop takes from its floor until every wait is the ceiling (doubling)."""
    total_ms, wait_ms = 0, floor_ms
    while wait_ms < ceiling_ms:
        total_ms += wait_ms
        wait_ms *= 2
    return total_ms / 1000 + WARM_UP_MARGIN_S


def commands_per_pass(queues: int) -> int:
    """One EVALSHA claim per served queue, and the presence EVALSHA pipelined with them."""
    return queues + 1


def allowed_per_window(queues: int, window_s: float) -> float:
    """The budget scaled to the window: (12 passes a minute, scaled) + 1 pass, in commands."""
    return (BUDGET_PASSES * window_s / 60 + SLACK_PASSES) * commands_per_pass(queues)


async def one_idle_pass(idle: Idle, queues: tuple[str, ...], worker: xjobs.Worker) -> Counted:
    """The commands of one claim shaped as the worker's idle pass, for a registry row that exists,
    on connections already dialed."""
    registry = idle.backend.workers
    assert registry is not None
    options = worker.options
    probe_id = f"probe-{secrets.token_hex(4)}"
    now = idle.backend.clock.now_ms()
    await registry.announce(WorkerInfo(probe_id, "probe", 0, queues, now, now), 60_000)
    claim = ClaimOptions(
        probe_id,
        {q: options.concurrency[q] for q in queues},
        options.lease_ms,
        options.presence_ttl_ms,
        limit=options.max_in_flight,
    )
    # once before measuring: any connection the pass takes is dialed (its HELLO) outside the
    # count, so the measured pass counts the pass alone
    await idle.backend.jobs.claim(claim)
    before = await commandstats(idle.meter)
    result = await idle.backend.jobs.claim(claim)
    counted = await count(idle.meter, before)
    await registry.forget(probe_id)
    assert (result.jobs, result.buried) == ((), ())
    return counted


async def measure(
    idle: Idle, jobs: list[object], queues: tuple[str, ...]
) -> tuple[Counted, Counted]:
    """One idle pass, then an idle worker's window of whole ceilings."""
    # retention=None: the budget is pinned for these jobs' queues (the purge job serves `default`)
    async with xjobs.App(idle.backend, jobs=jobs, retention=None) as app:
        worker = app.worker(concurrency=CONCURRENCY)
        assert worker.options.queues == queues
        wake = idle.backend.wake
        assert wake is not None
        per_pass = await one_idle_pass(idle, queues, worker)
        await worker.start()
        try:
            async with asyncio.timeout(LIVE_WITHIN_S):
                while not wake.live:  # noqa: ASYNC110 - the source has no event to await
                    await asyncio.sleep(0.01)
            await asyncio.sleep(warm_up_s(worker.options.poll_floor_ms, CEILING_WITH_WAKE_MS))
            before = await commandstats(idle.meter)
            started = time.monotonic()
            await asyncio.sleep(WINDOW_S)
            window = await count(idle.meter, before)
            elapsed = time.monotonic() - started
            assert worker.state == "running"
            assert worker.stats.claimed == 0
        finally:
            await worker.stop()
    assert elapsed < WINDOW_S + 0.5, f"the window ran {elapsed:.2f} s, not {WINDOW_S} s"
    return per_pass, window


def report(queues: tuple[str, ...], per_pass: Counted, window: Counted) -> None:
    scale = 60 / WINDOW_S
    print(
        f"\nidle worker on {len(queues)} queue(s), wake live: "
        f"{window.sent} commands sent in {WINDOW_S:.0f} s = {window.sent * scale:.1f}/min "
        f"(budget {allowed_per_window(len(queues), 60):.0f}/min: "
        f"({BUDGET_PASSES} + {SLACK_PASSES}) passes x {commands_per_pass(len(queues))}); "
        f"{window.total * scale:.1f}/min executed counting the scripts' own calls; "
        f"one idle pass = {per_pass.sent} sent + {per_pass.in_script} in-script "
        f"{dict(per_pass.by_name)}; window by command: {dict(window.by_name)}"
    )


def assert_within_budget(queues: tuple[str, ...], per_pass: Counted, window: Counted) -> None:
    n = len(queues)
    # One idle pass is one pipeline: an EVALSHA per served queue, and the presence EVALSHA.
    assert per_pass.sent == commands_per_pass(n), dict(per_pass.by_name)
    assert per_pass.by_name["evalsha"] == commands_per_pass(n), dict(per_pass.by_name)
    allowed = allowed_per_window(n, WINDOW_S)
    assert window.sent <= allowed, (
        f"{window.sent} commands sent in {WINDOW_S} s idle is over the budget of "
        f"{BUDGET_PASSES} passes/min x {commands_per_pass(n)}: {dict(window.by_name)}"
    )
    passes_allowed = BUDGET_PASSES * WINDOW_S / 60 + SLACK_PASSES
    assert window.total <= passes_allowed * per_pass.total, (
        f"{window.total} commands executed in {WINDOW_S} s idle is more than "
        f"{passes_allowed:.0f} idle passes of {per_pass.total}: {dict(window.by_name)}"
    )
    assert window.by_name["evalsha"] > 0, (
        "an idle worker must keep polling: the poll is the guarantee"
    )


@pytest.mark.asyncio
async def test_an_idle_worker_on_one_queue_sends_at_most_12_passes_of_2_commands_a_minute(
    idle: Idle,
) -> None:
    queues = ("idle-a",)
    per_pass, window = await measure(idle, [idle_a], queues)
    report(queues, per_pass, window)
    assert_within_budget(queues, per_pass, window)


@pytest.mark.asyncio
async def test_an_idle_worker_on_two_queues_sends_at_most_12_passes_of_3_commands_a_minute(
    idle: Idle,
) -> None:
    queues = ("idle-a", "idle-b")
    per_pass, window = await measure(idle, [idle_a, idle_b], queues)
    report(queues, per_pass, window)
    assert_within_budget(queues, per_pass, window)


def test_the_warm_up_covers_the_doubling_from_the_default_floor_to_the_ceiling() -> None:
    floor_ms = int(DEFAULT_POLL_FLOOR.total_seconds() * 1000)
    # 50+100+…+3200 ms below 5 s, plus the margin
    assert warm_up_s(floor_ms, CEILING_WITH_WAKE_MS) == pytest.approx(6.35 + WARM_UP_MARGIN_S)


def test_the_budget_is_12_passes_and_one_of_slack_per_minute() -> None:
    assert allowed_per_window(1, 60) == 26
    assert allowed_per_window(2, 60) == 39
    assert allowed_per_window(1, WINDOW_S) == 8  # three ceilings and the edge's pass, x 2


def test_the_scripts_call_commands_a_client_never_needs_to_send_for_an_idle_pass() -> None:
    # The split of SENT from IN-SCRIPT rests on this: the script commands are not script calls.
    assert not (IN_SCRIPT & SCRIPT_COMMANDS)
    assert {"time", "zrangebyscore", "zrange", "zscore", "zadd", "hset"} <= IN_SCRIPT
