"""The Lua scripts are first-class source: each has its header, none builds a key, each runs."""

from __future__ import annotations

import json
import re
from collections.abc import Callable

import pytest
from redis.asyncio import Redis

from xjobs.clock import Clock, ManualClock, SystemClock
from xjobs.contract.driver import LAPSED_ON_FINAL_ATTEMPT
from xjobs.ids import new_id
from xjobs_redis.executor import Arg, Executor
from xjobs_redis.keys import Keys
from xjobs_redis.scripts import LIBRARY, load_scripts, lua_names, read_lua

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


@pytest.mark.parametrize("name", ALL_FILES)
def test_no_script_holds_a_key_fragment(name: str) -> None:
    for literal in STRING.findall(code(read_lua(name))):
        assert not set(literal) & set(":{}"), f"{name}.lua holds a key fragment: {literal}"


def test_every_loaded_script_has_the_library_in_front() -> None:
    library = read_lua(LIBRARY)
    assert sorted(load_scripts()) == lua_names()
    for script in load_scripts().values():
        assert script.source.startswith(library)


class Recorder:
    """An executor wrapper that remembers which scripts ran."""

    def __init__(self, executor: Executor) -> None:
        self.x = executor
        self.ran: set[str] = set()

    async def __call__(self, script: str, keys: list[str], args: list[Arg]) -> object:
        self.ran.add(script)
        return await self.x.run(script, keys, args)


def _row(job_id: str, run_id: str, queue: str) -> str:
    return json.dumps(
        {
            "id": job_id,
            "run_id": run_id,
            "name": "script_job",
            "queue": queue,
            "tenant_id": None,
            "idempotency_key": "k-1",
            "payload": '{"n": 1}',
            "priority": 2,
            "run_at_ms": None,
            "max_attempts": 3,
            "dead_letter": True,
            "enqueued_by": None,
            "traceparent": None,
        }
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
    job_id, run_id = new_id(), new_id()
    job = k.job(q, job_id)
    finished = [k.finished(q, s) for s in ("completed", "failed", "dead", "cancelled")]
    claim_keys = [k.ready(q), k.delayed(q), k.leased(q), k.live(q), finished[2], finished[1]]
    claim_args: list[Arg] = [now, 1, "w-1", 30_000, LAPSED_ON_FINAL_ATTEMPT, 1000]
    fence: list[Arg] = [now, "w-1", 1]

    enqueue_keys = [k.ready(q), k.delayed(q), k.live(q), k.queues(), job]
    enqueue_args: list[Arg] = [now, q, k.wake_channel(), _row(job_id, run_id, q)]
    assert await run("enqueue", enqueue_keys, enqueue_args) == [[job_id, run_id, 1]]
    assert await client.smembers(k.queues()) == {q}
    ((score, member),) = await run("peek", [k.ready(q), k.delayed(q), k.leased(q)], [now, 5, 10])
    assert (score >= 2 * 2**42, member) == (True, job)
    claimed, buried = await run("claim", claim_keys, claim_args)
    assert ([c[0] for c in claimed], buried) == ([job_id], [])
    assert await run("heartbeat", [job, k.leased(q)], [*fence, 30_000]) == 1
    assert await run("record_progress", [job], [*fence, "0.5"]) == 1
    assert await run("ack", [job, k.leased(q), k.live(q), finished[0]], fence) == 1
    status, _ = await run("requeue", [job, k.ready(q), k.live(q), *finished], [now])
    assert status == "requeued"
    await run("claim", claim_keys, claim_args)
    nack = [*[now, "w-1", 2], "dead", "", 1, 1, "gave up"]
    nack_keys = [job, k.ready(q), k.delayed(q), k.leased(q), k.live(q), finished[2], finished[1]]
    assert await run("nack", nack_keys, nack) == 1
    assert await run("requeue_many", [k.ready(q), k.live(q), finished[2]], [now, 10, 0, ""]) == [
        1,
        0,
    ]
    cancel_keys = [job, k.ready(q), k.delayed(q), k.leased(q), k.live(q), finished[3]]
    status, _ = await run("cancel", cancel_keys, [now, "cancelled"])
    assert status == "cancelled"

    registry = [k.workers(), k.worker_info(), k.worker_seen()]
    info = json.dumps({"host": "h", "pid": 1, "queues": [q], "started_at_ms": 0})
    await run("worker_announce", registry, [now, "w-1", info, 60_000])
    assert await run("worker_beat", [registry[0], registry[2]], [now, "w-1", 60_000]) == 1
    assert [row[0] for row in await run("worker_list", registry, [now])] == ["w-1"]
    assert await run("worker_forget", registry, ["w-1"]) == 1

    lease = k.lease("job:script_job")
    assert await run("slot_acquire", [lease], [now, f"{job_id}:1", 1, 60_000]) == 1
    assert await run("slot_renew", [lease], [now, f"{job_id}:1", 60_000]) == 1
    assert await run("slot_holders", [lease], [now]) == [f"{job_id}:1"]
    if clock == "server":
        assert 0 < await client.pttl(lease) <= 60_000  # the key expires with its last slot
    assert await run("slot_release", [lease], [now, f"{job_id}:1"]) == 1

    await _run_the_step_and_event_scripts(run, k, now)
    await _run_the_scheduler_scripts(run, k, now)

    assert run.ran == set(lua_names())


async def _run_the_step_and_event_scripts(run: Recorder, k: Keys, now: Arg) -> None:
    """A second job claimed, a step recorded, parked on an event, woken by a send, then purged."""
    q, job_id, run_id = "events", new_id(), new_id()
    job = k.job(q, job_id)
    finished = [k.finished(q, s) for s in ("dead", "failed")]
    keys = [k.ready(q), k.delayed(q), k.live(q), k.queues(), job]
    await run("enqueue", keys, [now, q, k.wake_channel(), _row(job_id, run_id, q)])
    claim_keys = [k.ready(q), k.delayed(q), k.leased(q), k.live(q), *finished]
    await run("claim", claim_keys, [now, 1, "w-1", 30_000, LAPSED_ON_FINAL_ATTEMPT, 1000])
    record = {"status": "done", "result": "1", "error": None, "position": 0, "created_at_ms": 0}
    steps = [job, k.steps(q, run_id)]
    assert await run("step_put", steps, ["w-1", 1, "one", json.dumps(record)]) == 1
    assert await run("step_put", steps, ["w-1", 1, "one", json.dumps(record)]) == 0  # done stays

    wait = {
        "job_id": job_id,
        "run_id": run_id,
        "queue": q,
        "step": "two",
        "event": "paid",
        "match": '{"order": 7}',
        "since_ms": 0,
        "deadline_ms": None,
        "index": k.event_waiting("paid"),
        "job": job,
        "ready": k.ready(q),
        "delayed": k.delayed(q),
    }
    park_keys = [
        job,
        k.ready(q),
        k.delayed(q),
        k.leased(q),
        k.event_waits(),
        k.event_waiting("paid"),
        k.event_deadlines(),
        k.events_sent("paid"),
        k.event_payloads(),
    ]
    far = 2**50
    park_args: list[Arg] = [now, "w-1", 1, far, job_id, json.dumps(wait), '{"order": 7}', 0, ""]
    assert await run("event_park", park_keys, park_args) == 1
    assert await run.x.client.hget(job, "state") == "waiting"
    send_keys = [
        k.event_names(),
        k.events_sent("paid"),
        k.event_payloads(),
        k.event_waits(),
        k.event_waiting("paid"),
        k.event_deadlines(),
    ]
    sent_at = int(await run("event_send", send_keys, [now, "e-1", '{"order": 7}']))
    assert await run.x.client.zscore(k.ready(q), job) is not None  # woken: due now
    found = await run("event_find", send_keys[1:3], ['{"order": 7}', 0])
    assert found[:2] == ["e-1", sent_at]
    assert (
        await run(
            "event_purge",
            [send_keys[0], send_keys[2], k.event_waits(), k.event_deadlines()],
            [sent_at + 1],
        )
        == 1
    )


async def _run_the_scheduler_scripts(run: Recorder, k: Keys, now: Arg) -> None:
    """A task armed, then fired once (its job enqueued), a stale fire refused; the leader taken back."""
    q, job_id, run_id = "cron", new_id(), new_id()
    marks, fires = k.scheduler_watermarks(), k.scheduler_fires()
    assert await run("scheduler_arm", [marks], ["nightly", "", 1_000]) == 1
    assert await run("scheduler_arm", [marks], ["nightly", "", 2_000]) == 0
    fire_keys = [marks, fires, k.ready(q), k.delayed(q), k.live(q), k.job(q, job_id)]
    row = _row(job_id, run_id, q)
    assert await run("scheduler_fire", fire_keys, [now, "nightly", "1000", 2_000, row]) == 1
    assert await run("scheduler_fire", fire_keys, [now, "nightly", "1000", 3_000, row]) == 0
    assert await run.x.client.hget(k.job(q, job_id), "state") == "ready"
    assert json.loads(str(await run.x.client.hget(fires, "nightly")))["job_id"] == job_id

    leader = k.scheduler_leader()
    assert await run("leader_acquire", [leader], [now, "s-1", 60_000]) == 1
    assert await run("leader_acquire", [leader], [now, "s-2", 60_000]) == 0
    assert await run("leader_release", [leader], ["s-2"]) == 0
    assert await run("leader_release", [leader], ["s-1"]) == 1
