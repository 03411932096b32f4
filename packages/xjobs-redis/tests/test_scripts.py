"""The Lua scripts are first-class source: each has its header, none builds a key, each runs."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from typing import Any

import pytest
from redis.asyncio import Redis

from xjobs.clock import Clock, ManualClock, SystemClock
from xjobs.contract.backfills import BackfillStart
from xjobs.contract.children import ChildGroup
from xjobs.contract.driver import LAPSED_ON_FINAL_ATTEMPT, Claim, NewJob
from xjobs.contract.rates import RateBucket
from xjobs.contract.stores import EventWait, SlotHolder, StepRecord, WorkerInfo
from xjobs.contract.webhooks import LedgerPolicy, WebhookAttempt
from xjobs.run.settle import ending, parking
from xjobs.testing import rows
from xjobs_redis import registry
from xjobs_redis.calls import (
    backfills,
    children,
    events,
    fleet,
    jobs,
    operator,
    purge,
    rates,
    scheduler,
    webhooks,
)
from xjobs_redis.calls.operator import WalkFilter
from xjobs_redis.executor import Call, Executor
from xjobs_redis.keys import JOB_MARK, Keys
from xjobs_redis.scripts import (
    LIBRARY,
    OOM_SHEBANG,
    library_for,
    library_statements,
    load_scripts,
    lua_names,
    read_lua,
)

ALL_FILES = [LIBRARY, *lua_names()]
CALL = re.compile(r"redis\.p?call\(")
KEY_ARGUMENT = re.compile(r"KEYS\[(\d+|[A-Za-z_]\w*)\]|[A-Za-z_]\w*(\[\d+\])?")
ASSIGNMENT = re.compile(r"^\s*(?:local\s+)?([A-Za-z_][\w\s,]*?)\s*=(?!=)(.*)$")
STRING = re.compile(r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"")
KEYLESS_COMMANDS = {"TIME"}


def header(text: str) -> str:
    """The comment block a file opens with."""
    lines = []
    for line in text.splitlines():
        if not line.startswith("--"):
            break
        lines.append(line)
    return "\n".join(lines)


def code(text: str) -> str:
    """The file without its comments (no script holds `--` inside a string)."""
    return "\n".join(line.split("--", 1)[0] for line in text.splitlines())


def call_arguments(source: str, start: int) -> list[str]:
    """The top-level arguments of the call whose `(` is at `start - 1` (string literals skipped)."""
    depth, current, found, quote = 0, "", [], ""
    for char in source[start:]:
        if quote:
            quote = "" if char == quote and not current.endswith("\\") else quote
        elif char in "'\"":
            quote = char
        elif char in "([{":
            depth += 1
        elif char in ")]}":
            if depth == 0:
                found.append(current.strip())
                return found
            depth -= 1
        if char == "," and depth == 0 and not quote:
            found.append(current.strip())
            current = ""
        else:
            current += char
    raise AssertionError(f"unclosed call at {start}")


def key_arguments(source: str) -> list[str]:
    """The key argument of every `redis.call` / `redis.pcall` in `source`."""
    keys = []
    for match in CALL.finditer(source):
        args = call_arguments(source, match.end())
        command = args[0].strip("'\"").upper()
        if command not in KEYLESS_COMMANDS:
            keys.append(args[1])
    return keys


@pytest.mark.parametrize("name", ALL_FILES)
def test_every_lua_file_opens_with_its_keys_argv_and_reply(name: str) -> None:
    opening = header(read_lua(name))
    assert opening, f"{name}.lua must open with a header comment"
    for part in ("KEYS", "ARGV", "reply:"):
        assert part in opening, f"the header of {name}.lua does not list its {part}"


def built_keys(source: str) -> list[str]:
    """What in `source` builds a key name: a concatenated key argument, or a key variable assigned one."""
    keys = key_arguments(source)
    found = [key for key in keys if ".." in key or not KEY_ARGUMENT.fullmatch(key)]
    used = {key for key in keys if not key.startswith("KEYS[")}
    for line in source.splitlines():
        assigned = ASSIGNMENT.match(line)
        if assigned is None:
            continue
        names = {part.strip() for part in assigned.group(1).split(",")}
        if names & used and ".." in assigned.group(2):
            found.append(line.strip())
    return found


@pytest.mark.parametrize("name", ALL_FILES)
def test_no_script_builds_a_key_name(name: str) -> None:
    assert built_keys(code(read_lua(name))) == []


@pytest.mark.parametrize(
    "source",
    [
        "return redis.call('HGET', ARGV[1] .. ARGV[2], 'state')",
        "local job = ARGV[1] .. ARGV[2]\nreturn redis.call('HGET', job, 'state')",
        "return redis.call('ZADD', string.format('%s', ARGV[1]), 1, 'x')",
    ],
)
def test_the_check_catches_a_built_key(source: str) -> None:
    assert built_keys(source) != []


# The compact job HASH stores neither its id nor its queue: lib.lua reads them back out of the
# job's key (as xjobs_redis.keys.job_id_of does), the one place a script knows a key's shape; it
# builds no key from them.
KEY_READERS = {"lib": {"':job:'", "'^[^{]*{[^:}]*:([^}]*)}'"}}


@pytest.mark.parametrize("name", ALL_FILES)
def test_no_script_holds_a_key_fragment(name: str) -> None:
    for literal in STRING.findall(code(read_lua(name))):
        if literal in KEY_READERS.get(name, set()):
            continue
        assert not set(literal) & set(":{}"), f"{name}.lua holds a key fragment: {literal}"


def test_the_key_readers_read_the_keys_the_python_side_builds() -> None:
    library = code(read_lua(LIBRARY))
    for literal in KEY_READERS[LIBRARY]:
        assert literal in library
    assert f"'{JOB_MARK}'" in KEY_READERS[LIBRARY]


def test_every_loaded_script_has_the_library_part_it_uses_in_front() -> None:
    library = read_lua(LIBRARY)
    assert sorted(load_scripts()) == lua_names()
    for script in load_scripts().values():
        body = read_lua(script.name)
        assert script.source.removeprefix(OOM_SHEBANG) == f"{library_for(library, body)}\n{body}"


def test_the_library_splits_into_its_statements_and_each_part_defines_what_it_calls() -> None:
    library = read_lua(LIBRARY)
    statements = library_statements(library)
    assert "".join(text for _, text in statements) == library
    defined = {name for names, _ in statements for name in names}
    assert {"clock_ms", "jget", "whole", "QUOTE", "CLOSE_BRACKET"} <= defined
    for script in load_scripts().values():
        words = set(re.findall(r"[A-Za-z_]\w*", read_lua(script.name)))
        carried = {n for names, text in statements if text in script.source for n in names}
        assert words & defined <= carried, script.name
    enqueue = load_scripts()["enqueue"].source
    assert "local function enqueue_row(" in enqueue
    assert "local function jget(" in enqueue
    assert "local function decode_json(" not in enqueue  # the event match's helper: not needed


class Recorder:
    """An executor wrapper that remembers which scripts ran."""

    def __init__(self, executor: Executor) -> None:
        self.x = executor
        self.ran: set[str] = set()

    async def __call__(self, call: Call) -> Any:
        self.ran.add(call.script)
        return await self.x.run(call)


def _job(queue: str) -> NewJob:
    return rows.new_job(name="script_job", queue=queue, idempotency_key="k-1", priority=2)


async def _run_ack_many(run: Recorder, k: Keys, now: str) -> None:
    """Two runs of one queue acked in one call, each on its own fence: a claim of another worker
    misses (nothing written), the holders' settle, and a repeated one misses."""
    q = "acked"
    first, second = (rows.new_job(name="script_job", queue=q) for _ in range(2))
    await registry.join(run.x, k, [q])
    await run(jobs.enqueue(k, now=now, queue=q, jobs=[first, second]))
    claimed, _ = await run(_claim(k, now, q, take=2))
    assert sorted(json.loads(c)[0] for c in claimed) == sorted([first.id, second.id])
    held = [Claim(first.id, "w-1", 1, q), Claim(second.id, "w-1", 1, q, run_id=second.run_id)]
    claims = [Claim(first.id, "w-2", 1, q), *held, held[0]]
    assert await run(jobs.ack_many(k, now=now, queue=q, claims=claims)) == [0, 1, 1, 0]
    for job in (first, second):
        assert await run.x.client.hget(k.job(q, job.id), "state") == "completed"
    assert await run.x.client.zcard(k.finished(q, "completed")) == 2


def _claim(k: Keys, now: str, queue: str, take: int = 1) -> Call:
    return jobs.claim(
        k,
        now=now,
        queue=queue,
        take=take,
        worker_id="w-1",
        lease_ms=30_000,
        buried_error=LAPSED_ON_FINAL_ATTEMPT,
        sweep_bound=1000,
    )


CLOCKS: dict[str, Callable[[], Clock]] = {"injected": ManualClock, "server": SystemClock}


@pytest.mark.asyncio
@pytest.mark.parametrize("clock", sorted(CLOCKS))
async def test_every_script_loads_and_runs_against_the_server(
    client: Redis, prefix: str, clock: str
) -> None:
    executor = Executor(client, CLOCKS[clock]())
    await executor.load()
    run = Recorder(executor)
    now = executor.now()
    k, q = Keys(prefix), "scripts"
    new = _job(q)
    job = k.job(q, new.id)
    first, second = Claim(new.id, "w-1", 1, q), Claim(new.id, "w-1", 2, q)

    assert await run(jobs.enqueue(k, now=now, queue=q, jobs=[new])) == "join"  # wrote nothing
    assert not await client.exists(job)
    await registry.join(executor, k, [q])
    assert await client.smembers(k.queues()) == {q}
    assert await run(jobs.enqueue(k, now=now, queue=q, jobs=[new])) == [1]  # inserted
    again = jobs.enqueue(k, now=now, queue=q, jobs=[new, _job(q)])
    assert await run(again) == [[new.id, new.run_id]] * 2  # by id, then by namespace
    ((score, member),) = await run(jobs.peek(k, now=now, queue=q, want=5, sweep_bound=10))
    assert (score >= 2 * 2**42, member) == (True, job)
    claimed, buried = await run(_claim(k, now, q))
    assert ([json.loads(c)[0] for c in claimed], buried) == ([new.id], [])
    assert await run(jobs.heartbeat(k, now=now, queue=q, claim=first, lease_ms=30_000)) == 1
    assert await run(jobs.record_progress(k, now=now, queue=q, claim=first, progress=0.5)) == 1
    assert await run(jobs.watch(k, queue=q, job_id=new.id)) == "running"
    assert await run(jobs.ack(k, now=now, queue=q, claim=first, result='{"n": 1}')) == 1
    assert await client.hmget(job, "result", "watch") == ['{"n": 1}', None]
    ((status, _),) = await run(
        jobs.requeue(k, now=now, queue=q, jobs=[(new.id, new.run_id)], answer_records=True)
    )
    assert status == "requeued"
    assert not await client.hexists(job, "result")
    await run(_claim(k, now, q))
    dead = ending(True, "gave up")
    assert await run(jobs.nack(k, now=now, queue=q, claim=second, nack=dead)) == 1
    assert await client.hmget(job, "state", "last_error") == ["dead", "gave up"]
    assert await client.hexists(k.errors(q), new.id)
    walk = operator.walk(
        k,
        queue=q,
        index="dead",
        newest=True,
        position=None,
        where=WalkFilter(),
        want=10,
        budget=100,
        fields=["id"],
    )
    rows, _, last, exhausted, examined = await run(walk)
    assert (rows, last, exhausted, examined) == ([[new.id]], job, 1, 1)
    ((status, _),) = await run(
        jobs.requeue(k, now=now, queue=q, jobs=[(new.id, new.run_id)], answer_records=False)
    )
    assert status == "requeued"
    ((status, moved, _),) = await run(
        operator.promote(k, now=now, queue=q, job_ids=[new.id], answer_records=False)
    )
    assert (status, moved) == ("promoted", 0)
    now_ms = int(now) if now else int(time.time() * 1000)
    counts = operator.queue_counts(k, queue=q, now_ms=now_ms, cap=10, bound=10)
    assert (await run(counts))[0] == 1  # the requeued job is ready
    ((status, _),) = await run(
        jobs.cancel(k, now=now, queue=q, job_ids=[new.id], error="cancelled", answer_records=True)
    )
    assert status == "cancelled"
    read = operator.counters_read(k, queue=q, tier="minute", since_ms=0)
    outcomes = sorted(str(field).split("|")[1] for field in (await run(read))[::2])
    assert outcomes == ["cancelled", "completed", "dead-lettered"]
    next_minute = now_ms + 60_000
    assert len(await run(operator.counters_rollup(k, queue=q, now_ms=next_minute))) == 1
    removal = operator.remove(k, queue=q, jobs=[(new.id, new.run_id)], answer_records=False)
    assert [answer[0] for answer in await run(removal)] == ["removed"]
    assert not await client.exists(job)
    assert await run(events.wait_drop(k, queue=q, job_ids=[new.id])) == 0

    info = WorkerInfo("w-1", "h", 1, (q,), 0, 0)
    await run(fleet.worker_announce(k, now=now, info=info, ttl_ms=60_000))
    assert await run(fleet.worker_beat(k, now=now, worker_id="w-1", ttl_ms=60_000)) == 1
    assert [row[0] for row in await run(fleet.worker_list(k, now=now))] == ["w-1"]
    assert await run(fleet.worker_forget(k, worker_id="w-1")) == 1

    key, holder = "job:script_job", SlotHolder(new.id, 1)
    acquire = fleet.slot_acquire(k, now=now, key=key, holder=holder, limit=1, ttl_ms=60_000)
    assert await run(acquire) == 1
    assert await run(fleet.slot_renew(k, now=now, key=key, holder=holder, ttl_ms=60_000)) == 1
    assert await run(fleet.slot_holders(k, now=now, key=key)) == [f"{new.id}:1"]
    if clock == "server":
        assert 0 < await client.pttl(k.slot(key)) <= 60_000  # the key expires with its last slot
    assert await run(fleet.slot_release(k, now=now, key=key, holder=holder)) == 1

    await _run_ack_many(run, k, now)
    await _run_the_step_and_event_scripts(run, k, now)
    await _run_the_scheduler_scripts(run, k, now)
    await _run_the_purge_scripts(run, k, now)
    await _run_the_webhook_scripts(run, k)
    await _run_the_backfill_scripts(run, k, now)
    await _run_the_rate_scripts(run, k, now)
    await _run_the_children_scripts(run, k, now)

    assert run.ran == set(lua_names())


async def _run_the_rate_scripts(run: Recorder, k: Keys, now: str) -> None:
    """Two buckets' permits taken at once, the next refused by the full one, handed back."""
    minute = RateBucket("job:script_job", 60_000.0, 1)
    roomy = RateBucket("queue:scripts", 60_000.0, 1_000)
    # two grants of one call: the first takes both permits, so the second is refused by the full one
    first, wait = await run(
        rates.rate_acquire(k, now=now, grants=[[minute, roomy], [roomy, minute]])
    )
    assert first == 0
    assert 0 < wait <= 60_000  # refused: the full bucket is free again within its interval
    ahead = float(await run(rates.rate_spent(k, now=now, key=minute.key)))
    assert 0 < ahead <= 60_000
    assert await run(rates.rate_abandon(k, now=now, buckets=[minute, roomy])) == 2
    assert float(await run(rates.rate_spent(k, now=now, key=minute.key))) == 0
    # held ahead: the roomy bucket takes 8 permits placed after a 200 ms hold; the minute one never can
    assert await run(rates.rate_reserve(k, now=now, buckets=[roomy], count=8, hold_ms=200)) == 1
    held = float(await run(rates.rate_spent(k, now=now, key=roomy.key)))
    assert 200 + 8 * 60_000 - 1_000 < held <= 200 + 8 * 60_000  # on the server's clock, ms later
    assert (
        await run(rates.rate_reserve(k, now=now, buckets=[roomy, minute], count=1, hold_ms=0)) == 0
    )


async def _run_the_backfill_scripts(run: Recorder, k: Keys, now: str) -> None:
    """A run begun, checkpointed, completed (the verdict), then read back by its declaration."""
    start = BackfillStart("r-1", "j-1", "fill", "c1", "ci", None)
    assert await run(backfills.backfill_begin(k, now=now, start=start)) == 1
    checkpoint = backfills.backfill_checkpoint(
        k, now=now, run_id="r-1", cursor="3", count=3, batches=1
    )
    assert await run(checkpoint) == 1
    finish = backfills.backfill_finish(k, now=now, run_id="r-1", status="completed", error=None)
    assert await run(finish) == 1
    verdict = backfills.backfill_completed(
        k, name="fill", checksum="c1", environment="ci", tenant=None
    )
    row = json.loads(str(await run(verdict)))
    assert (row["run_id"], row["status"], row["cursor"], row["count"]) == (
        "r-1",
        "completed",
        "3",
        3,
    )


async def _run_the_webhook_scripts(run: Recorder, k: Keys) -> None:
    failed = WebhookAttempt("e-1", "msg_1", "j-1", 1, "failed", 503, 1, "", "x", 5)
    record = webhooks.webhook_record(k, attempt=failed, policy=LedgerPolicy(disable_after=1))
    assert await run(record) == [1, "5"]
    assert await run(webhooks.webhook_enable(k, endpoint="e-1")) == 1


async def _run_the_children_scripts(run: Recorder, k: Keys, now: str) -> None:
    """A parent's one-child group: the fence, the page, the child's ack recording its ending, the
    ending applied (twice: counted once), the park after it due now, and its wake, once."""
    q = "kids"
    await registry.join(run.x, k, [q])
    parent, kid = _job(q), rows.new_job(name="script_kid", queue=q)
    await run(jobs.enqueue(k, now=now, queue=q, jobs=[parent]))
    await run(_claim(k, now, q))
    claim = Claim(parent.id, "w-1", 1, q)
    assert await run(children.child_fence(k, queue=q, claim=claim)) == 1
    group = ChildGroup(parent.id, parent.run_id, q, "fan", 1, True, True)
    page = children.child_group(k, group=group, first_index=0, child_keys=[k.job(q, kid.id)])
    assert await run(page) == 1
    link = json.dumps({"x": k.child_endings(q), "r": parent.run_id, "s": "fan", "i": 0})
    await run(jobs.enqueue(k, now=now, queue=q, jobs=[kid], links=[link]))
    spawned = children.child_spawned(k, parent_run_id=parent.run_id, step="fan", upto=1)
    assert await run(spawned) == 1
    (packed,), _ = await run(_claim(k, now, q))
    kid_claim = Claim(kid.id, "w-1", json.loads(packed)[10], q)
    assert await run(jobs.ack(k, now=now, queue=q, claim=kid_claim)) == 2  # an ending recorded
    assert await run.x.client.hkeys(k.child_endings(q)) == [kid.id]
    end = children.child_end(
        k, parent_run_id=parent.run_id, step="fan", child_id=kid.id, index=0, state="completed"
    )
    assert await run(end) == [0]  # resolved; the parent has not parked yet
    assert await run(end) == [0]  # counted once
    assert await run.x.client.hmget(k.group(parent.run_id, "fan"), "ended", "resolved") == [
        "1",
        "1",
    ]
    mark = children.child_parked(k, parent_run_id=parent.run_id, step="fan")
    assert await run(mark) == 1  # resolved already: the park is due now
    park = children.child_park(
        k, now=now, queue=q, claim=claim, nack=parking(2**50), run_at_ms=None,
        group=k.group(parent.run_id, "fan"),
    )  # fmt: skip
    assert await run(park) == 1
    assert await run.x.client.hget(k.job(q, parent.id), "state") == "waiting"
    wake = children.child_wake(
        k, now=now, queue=q, parent_id=parent.id, parent_run_id=parent.run_id, step="fan"
    )
    assert await run(wake) == 1
    assert await run(wake) == 0  # woken once: no longer parked on the group


async def _run_the_step_and_event_scripts(run: Recorder, k: Keys, now: str) -> None:
    """A second job claimed, a step recorded, parked on an event, woken by a send, then purged."""
    q = "events"
    new = _job(q)
    job, claim = k.job(q, new.id), Claim(new.id, "w-1", 1, q)
    await registry.join(run.x, k, [q])
    await run(jobs.enqueue(k, now=now, queue=q, jobs=[new]))
    await run(_claim(k, now, q))
    done = StepRecord(new.run_id, "one", "done", "1", None, 0, 0)
    put = events.step_put(k, queue=q, claim=claim, record=done)
    assert await run(put) == 1
    assert await run(put) == 0  # done stays

    wait = EventWait(new.id, new.run_id, q, "two", "paid", '{"order": 7}', 0, None)
    park = events.event_park(k, now=now, queue=q, claim=claim, wait=wait, nack=parking(2**50))
    assert await run(park) == 1
    assert await run.x.client.hget(job, "state") == "waiting"
    # as the bus's park does beside it: the queue counted in the name's HASH, which is listed
    await run.x.client.hincrby(k.event_queues("paid"), q, 1)
    await run.x.client.sadd(k.event_waited(), k.event_queues("paid"))
    send = events.event_send(k, now=now, name="paid", event_id="e-1", payload='{"order": 7}')
    sent_at, *waiting = await run(send)
    assert waiting == [q]
    wake = events.event_wake(k, now=now, queue=q, name="paid", payload='{"order": 8}')
    assert await run(wake) == 0  # no match
    wake = events.event_wake(k, now=now, queue=q, name="paid", payload='{"order": 7}')
    assert await run(wake) == 1
    assert await run.x.client.zscore(k.ready(q), job) is not None  # woken: due now
    found = await run(events.event_find(k, name="paid", match='{"order": 7}', since_ms=0))
    assert found[:3] == ["found", "e-1", sent_at]
    purge = events.event_purge(k, older_than_ms=int(sent_at) + 1)
    assert await run(purge) == [1, k.event_queues("paid"), q, "1"]  # one event; the queues listed
    lapse = events.wait_lapse(k, queue=q, older_than_ms=int(sent_at) + 1)
    assert await run(lapse) == 0  # the wake dropped the wait
    stale = events.event_queues_prune(k, unwaited=[("paid", q, "0")])
    assert await run(stale) == 0  # a park counted since the read: kept
    prune = events.event_queues_prune(k, unwaited=[("paid", q, "1")])
    assert await run(prune) == 1
    assert not await run.x.client.exists(k.event_queues("paid"), k.event_waited())


async def _run_the_purge_scripts(run: Recorder, k: Keys, now: str) -> None:
    """A job completed and purged with its steps; a counter bucket, a worker row, the events' count."""
    q = "purged"
    new = _job(q)
    await registry.join(run.x, k, [q])
    await run(jobs.enqueue(k, now=now, queue=q, jobs=[new]))
    await run(_claim(k, now, q))
    claim = Claim(new.id, "w-1", 1, q, new.run_id)
    step = StepRecord(new.run_id, "one", "done", "1", None, 0, 0)
    assert await run(events.step_put(k, queue=q, claim=claim, record=step)) == 1
    assert await run(jobs.ack(k, now=now, queue=q, claim=claim)) == 1
    later = (int(now) if now else int(time.time() * 1000)) + 1
    call = purge.purge_jobs(
        k, queue=q, state="completed", cutoff_ms=later, names={}, jobs=[(new.id, new.run_id)]
    )
    assert await run(call) == 1
    assert not await run.x.client.exists(k.job(q, new.id), k.steps(q, new.run_id))
    assert await run.x.client.zcard(k.finished(q, "completed")) == 0
    tier = purge.purge_counters(k, queue=q, tier="hour", cutoff_ms=later, limit=10, dry=True)
    assert await run(tier) == 0  # a completion counts in the minute tier only until a rollup
    assert await run(purge.purge_workers(k, cutoff_ms=later, limit=10, dry=False)) == 0
    assert await run(purge.purge_events_count(k, cutoff_ms=later)) >= 0


async def _run_the_scheduler_scripts(run: Recorder, k: Keys, now: str) -> None:
    """A task armed, then fired once (its job enqueued), a stale fire refused; the leader taken back."""
    q = "cron"
    new = _job(q)
    assert (
        await run(scheduler.scheduler_arm(k, task="nightly", previous_ms=None, watermark_ms=1_000))
        == 1
    )
    assert (
        await run(scheduler.scheduler_arm(k, task="nightly", previous_ms=None, watermark_ms=2_000))
        == 0
    )

    def fire(occurrence_ms: int) -> Call:
        return scheduler.scheduler_fire(
            k, now=now, task="nightly", previous_ms=1_000, occurrence_ms=occurrence_ms, job=new
        )

    fired_at = await run(fire(2_000))
    assert fired_at > 0  # the fire's instant: the injected clock's, when there is one
    assert fired_at == int(now or fired_at)
    assert await run(fire(3_000)) == -1  # refused: the fire before it is pending
    pending = json.loads(str(await run.x.client.hget(k.scheduler_pending(), "nightly")))
    assert (pending["occurrence_ms"], json.loads(pending["job"])["id"]) == (2_000, new.id)
    await registry.join(run.x, k, [q])
    await run(jobs.enqueue(k, now=now, queue=q, jobs=[new]))
    state, created = await run.x.client.hmget(k.job(q, new.id), "state", "c")
    assert (state, created is not None) == (None, True)  # ready: the default, not stored
    fired = scheduler.scheduler_fired(k, task="nightly", occurrence_ms=2_000, job_id=new.id)
    assert await run(fired) == 1
    assert await run(fired) == 0  # no longer pending
    recorded = await run.x.client.hget(k.scheduler_fires(), "nightly")
    assert json.loads(str(recorded))["job_id"] == new.id

    assert await run(scheduler.leader_acquire(k, now=now, candidate="s-1", ttl_ms=60_000)) == 1
    assert await run(scheduler.leader_acquire(k, now=now, candidate="s-2", ttl_ms=60_000)) == 0
    assert await run(scheduler.leader_release(k, candidate="s-2")) == 0
    assert await run(scheduler.leader_release(k, candidate="s-1")) == 1
