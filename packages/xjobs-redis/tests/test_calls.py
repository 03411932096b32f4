"""Each Lua script has one call builder, and it builds the KEYS and ARGV the script's header lists."""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from types import ModuleType

import pytest
from redis.crc import key_slot

from xjobs.contract.backfills import BackfillStart
from xjobs.contract.children import ChildGroup
from xjobs.contract.driver import Claim, Nack
from xjobs.contract.rates import RateBucket
from xjobs.contract.stores import EventWait, SlotHolder, StepRecord, WorkerInfo
from xjobs.contract.webhooks import LedgerPolicy, WebhookAttempt
from xjobs.testing import rows
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
from xjobs_redis.executor import Call
from xjobs_redis.keys import Keys
from xjobs_redis.scripts import lua_names, read_lua

FAMILIES: tuple[ModuleType, ...] = (
    jobs,
    children,
    fleet,
    events,
    scheduler,
    operator,
    purge,
    webhooks,
    backfills,
    rates,
)
# Module-level helpers of a family that are not script builders.
HELPERS = {"counted", "counter_keys"}
# A header entry: `-- KEYS[3]  ...`, `-- ARGV[3 + r]  ...`, `-- KEYS[3..]  ...`: the index, then a
# column of at least two spaces (prose that wraps onto a line starting `ARGV[2] ...` has one).
ENTRY = re.compile(r"^--\s+(KEYS|ARGV)\[([^\]]+)\]\s{2,}\S")
ROWS = 2  # how many entries a sample gives a script's repeated tail (rows, finished states)

K = Keys("xjobs_t_calls")
NOW = "1000"
CLAIM = Claim("j-1", "w-1", 3, "alpha")
JOB = rows.new_job(queue="alpha")
WAIT = EventWait("j-1", "r-1", "alpha", "paid", "order.paid", "{}", 0, None)
HOLDER = SlotHolder("j-1", 3)
GROUP = ChildGroup("j-1", "r-1", "alpha", "s", 2, True, True)
STEP = StepRecord("r-1", "charge", "done", "1", None, 0, 0)
INFO = WorkerInfo("w-1", "h", 1, ("alpha",), 0, 0)
PARK = Nack("waiting", "suspended", 2_000, counts_as_attempt=False)

BACKFILL = BackfillStart("r-1", "j-1", "fill", "c1", "ci", None)
# one bucket per entry of a rate script's repeated tail (the job's, the queue's)
BUCKETS = [RateBucket("job:a", 100.0, 2), RateBucket("queue:alpha", 50.0, 1)][:ROWS]

# One call per script, built from sample arguments; a script's repeated tail gets ROWS entries.
SAMPLES: dict[str, Callable[[], Call]] = {
    "enqueue": lambda: jobs.enqueue(K, now=NOW, queue="alpha", jobs=[JOB] * ROWS),
    "claim": lambda: jobs.claim(
        K,
        now=NOW,
        queue="alpha",
        take=1,
        worker_id="w-1",
        lease_ms=30_000,
        buried_error="lapsed",
        sweep_bound=1_000,
    ),
    "peek": lambda: jobs.peek(K, now=NOW, queue="alpha", want=1, sweep_bound=1_000),
    "ack": lambda: jobs.ack(K, now=NOW, queue="alpha", claim=CLAIM),
    # one claim's job HASH and steps HASH, its worker and claims: the two entries of each tail
    "ack_many": lambda: jobs.ack_many(K, now=NOW, queue="alpha", claims=[CLAIM] * (ROWS // 2)),
    "nack": lambda: jobs.nack(
        K, now=NOW, queue="alpha", claim=CLAIM, nack=Nack("dead", "dead-lettered", error="x")
    ),
    "watch": lambda: jobs.watch(K, queue="alpha", job_id="j-1"),
    "heartbeat": lambda: jobs.heartbeat(K, now=NOW, queue="alpha", claim=CLAIM, lease_ms=1),
    "record_progress": lambda: jobs.record_progress(
        K, now=NOW, queue="alpha", claim=CLAIM, progress=0.5
    ),
    "cancel": lambda: jobs.cancel(
        K, now=NOW, queue="alpha", job_ids=["j-1"] * ROWS, error="x", answer_records=True
    ),
    # one job's HASH and its steps HASH: the two entries of the tail
    "requeue": lambda: jobs.requeue(
        K, now=NOW, queue="alpha", jobs=[("j-1", "r-1")] * (ROWS // 2), answer_records=True
    ),
    "walk": lambda: operator.walk(
        K,
        queue="alpha",
        index="created",
        newest=True,
        position=(1, "j-1"),
        where=WalkFilter(),
        want=1,
        budget=10,
        fields=["id", "name"][:ROWS],
    ),
    "promote": lambda: operator.promote(
        K, now=NOW, queue="alpha", job_ids=["j-1"] * ROWS, answer_records=True
    ),
    # one job's HASH and its steps HASH: the two entries of the tail
    "remove": lambda: operator.remove(
        K, queue="alpha", jobs=[("j-1", "r-1")] * (ROWS // 2), answer_records=True
    ),
    "queue_counts": lambda: operator.queue_counts(K, queue="alpha", now_ms=1, cap=10, bound=10),
    "counters_read": lambda: operator.counters_read(K, queue="alpha", tier="minute", since_ms=0),
    "counters_rollup": lambda: operator.counters_rollup(K, queue="alpha", now_ms=1),
    "wait_drop": lambda: events.wait_drop(K, queue="alpha", job_ids=["j-1"] * ROWS),
    "wait_lapse": lambda: events.wait_lapse(K, queue="alpha", older_than_ms=0),
    "event_wake": lambda: events.event_wake(
        K, now=NOW, queue="alpha", name="order.paid", payload="{}", job_id="j-1"
    ),
    "worker_announce": lambda: fleet.worker_announce(K, now=NOW, info=INFO, ttl_ms=1),
    "worker_beat": lambda: fleet.worker_beat(K, now=NOW, worker_id="w-1", ttl_ms=1),
    "worker_forget": lambda: fleet.worker_forget(K, worker_id="w-1"),
    "worker_list": lambda: fleet.worker_list(K, now=NOW),
    "slot_acquire": lambda: fleet.slot_acquire(
        K, now=NOW, key="k", holder=HOLDER, limit=1, ttl_ms=1
    ),
    "slot_renew": lambda: fleet.slot_renew(K, now=NOW, key="k", holder=HOLDER, ttl_ms=1),
    "slot_release": lambda: fleet.slot_release(K, now=NOW, key="k", holder=HOLDER),
    "slot_holders": lambda: fleet.slot_holders(K, now=NOW, key="k"),
    "step_put": lambda: events.step_put(K, queue="alpha", claim=CLAIM, record=STEP),
    "event_send": lambda: events.event_send(
        K, now=NOW, name="order.paid", event_id="e-1", payload="{}"
    ),
    "event_find": lambda: events.event_find(K, name="order.paid", match="{}", since_ms=0),
    "event_park": lambda: events.event_park(
        K, now=NOW, queue="alpha", claim=CLAIM, wait=WAIT, nack=PARK
    ),
    "event_purge": lambda: events.event_purge(K, older_than_ms=0),
    "event_queues_prune": lambda: events.event_queues_prune(
        K, unwaited=[("order.paid", "alpha", "1"), ("order.shipped", "beta", "2")][:ROWS]
    ),
    "scheduler_arm": lambda: scheduler.scheduler_arm(
        K, task="nightly", previous_ms=None, watermark_ms=1
    ),
    "scheduler_fire": lambda: scheduler.scheduler_fire(
        K, now=NOW, task="nightly", previous_ms=1, occurrence_ms=2, job=JOB
    ),
    "scheduler_fired": lambda: scheduler.scheduler_fired(
        K, task="nightly", occurrence_ms=2, job_id="j-1"
    ),
    "leader_acquire": lambda: scheduler.leader_acquire(K, now=NOW, candidate="s-1", ttl_ms=1),
    "leader_release": lambda: scheduler.leader_release(K, candidate="s-1"),
    # one job's HASH and its steps HASH: the two entries of the tail
    "purge_jobs": lambda: purge.purge_jobs(
        K,
        queue="alpha",
        state="completed",
        cutoff_ms=1,
        names={},
        jobs=[("j-1", "r-1")] * (ROWS // 2),
    ),
    "purge_counters": lambda: purge.purge_counters(
        K, queue="alpha", tier="minute", cutoff_ms=1, limit=10, dry=False
    ),
    "purge_workers": lambda: purge.purge_workers(K, cutoff_ms=1, limit=10, dry=False),
    "purge_events_count": lambda: purge.purge_events_count(K, cutoff_ms=1),
    "webhook_record": lambda: webhooks.webhook_record(
        K,
        attempt=WebhookAttempt("e-1", "msg_1", "j-1", 1, "failed", 503, 1, "", "x", 1),
        policy=LedgerPolicy(disable_after=2),
    ),
    "webhook_enable": lambda: webhooks.webhook_enable(K, endpoint="e-1"),
    "backfill_begin": lambda: backfills.backfill_begin(K, now=NOW, start=BACKFILL),
    "backfill_checkpoint": lambda: backfills.backfill_checkpoint(
        K, now=NOW, run_id="r-1", cursor="3", count=3, batches=1
    ),
    "backfill_finish": lambda: backfills.backfill_finish(
        K, now=NOW, run_id="r-1", status="completed", error=None
    ),
    "backfill_completed": lambda: backfills.backfill_completed(
        K, name="fill", checksum="c1", environment="ci", tenant=None
    ),
    # one grant per entry of the ARGV tail; the keys are the buckets they name, each once
    "rate_acquire": lambda: rates.rate_acquire(K, now=NOW, grants=[BUCKETS[:1], BUCKETS]),
    "rate_reserve": lambda: rates.rate_reserve(K, now=NOW, buckets=BUCKETS, count=8, hold_ms=200),
    "rate_abandon": lambda: rates.rate_abandon(K, now=NOW, buckets=BUCKETS),
    "rate_spent": lambda: rates.rate_spent(K, now=NOW, key="job:a"),
    "child_fence": lambda: children.child_fence(K, queue="alpha", claim=CLAIM),
    "child_group": lambda: children.child_group(
        K, group=GROUP, first_index=0, child_keys=[K.job("beta", f"c-{i}") for i in range(ROWS)]
    ),
    "child_spawned": lambda: children.child_spawned(K, parent_run_id="r-1", step="s", upto=2),
    "child_end": lambda: children.child_end(
        K, parent_run_id="r-1", step="s", child_id="c-1", index=0, state="completed"
    ),
    "child_parked": lambda: children.child_parked(K, parent_run_id="r-1", step="s"),
    "child_park": lambda: children.child_park(
        K, now=NOW, queue="alpha", claim=CLAIM, nack=PARK, run_at_ms=None, group="g"
    ),
    "child_wake": lambda: children.child_wake(
        K, now=NOW, queue="alpha", parent_id="j-1", parent_run_id="r-1", step="s"
    ),
}


def builders() -> dict[str, list[str]]:
    """Every public function of the builder modules, by name: the modules where each is defined."""
    found: dict[str, list[str]] = {}
    for module in FAMILIES:
        for name, function in inspect.getmembers(module, inspect.isfunction):
            if (
                function.__module__ == module.__name__
                and not name.startswith("_")
                and name not in HELPERS
            ):
                found.setdefault(name, []).append(module.__name__)
    return found


def declared(script: str, part: str) -> int:
    """How many `part` (KEYS or ARGV) entries the script's header lists for a call of the sample.

    Numbered entries must run 1..n; an entry indexed otherwise (`4 + r`, `3..`) is a repeated
    tail, which a sample fills with ROWS entries.
    """
    numbered: list[int] = []
    tails = 0
    for line in read_lua(script).splitlines():
        if not line.startswith("--"):
            break
        entry = ENTRY.match(line)
        if entry is None or entry.group(1) != part:
            continue
        index = entry.group(2).strip()
        if index.isdigit():
            numbered.append(int(index))
        else:
            tails += 1
    assert numbered == list(range(1, len(numbered) + 1)), (
        f"{script}.lua numbers its {part} {numbered}"
    )
    assert tails <= 1, f"{script}.lua lists more than one repeated {part} tail"
    return len(numbered) + tails * ROWS


def test_every_script_has_exactly_one_builder_named_as_it_is() -> None:
    found = builders()
    assert sorted(found) == lua_names()
    assert {name: where for name, where in found.items() if len(where) > 1} == {}


def test_every_script_has_a_sample_call_here() -> None:
    assert sorted(SAMPLES) == lua_names()


@pytest.mark.parametrize("script", lua_names())
def test_the_builder_names_its_own_script(script: str) -> None:
    assert SAMPLES[script]().script == script


@pytest.mark.parametrize("script", lua_names())
def test_the_builder_passes_the_keys_the_header_lists(script: str) -> None:
    assert len(SAMPLES[script]().keys) == declared(script, "KEYS")


@pytest.mark.parametrize("script", lua_names())
def test_the_builder_passes_the_argv_the_header_lists(script: str) -> None:
    assert len(SAMPLES[script]().args) == declared(script, "ARGV")


@pytest.mark.parametrize(
    "header",
    [
        "-- KEYS[1]  a\n-- KEYS[3]  c\n-- reply: 1",
        "-- KEYS[1]  a\n-- KEYS[2..]  b\n-- KEYS[3 + r]  c\n-- reply: 1",
    ],
)
def test_the_header_check_refuses_a_gap_or_two_tails(
    header: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(f"{__name__}.read_lua", lambda _name: header)
    with pytest.raises(AssertionError):
        declared("any", "KEYS")


def test_a_live_nack_passes_the_same_keys_as_a_terminal_one() -> None:
    retry = jobs.nack(K, now=NOW, queue="alpha", claim=CLAIM, nack=Nack("ready", "retried"))
    dead = jobs.nack(K, now=NOW, queue="alpha", claim=CLAIM, nack=Nack("dead", "dead-lettered"))
    assert (len(retry.keys), len(retry.args)) == (len(dead.keys), len(dead.args))
    assert dead.keys[5] == K.finished("alpha", "dead")


def test_a_plain_ack_and_a_completion_differ_only_in_the_result() -> None:
    plain = jobs.ack(K, now=NOW, queue="alpha", claim=CLAIM)
    done = jobs.ack(K, now=NOW, queue="alpha", claim=CLAIM, result='{"n": 1}')
    assert plain.keys == done.keys
    assert (plain.args[:-1], plain.args[-1], done.args[-1]) == (done.args[:-1], "", '{"n": 1}')


def test_only_a_counted_outcome_reaches_a_settle_counter() -> None:
    retry = jobs.nack(K, now=NOW, queue="alpha", claim=CLAIM, nack=Nack("ready", "retried"))
    shed = jobs.nack(K, now=NOW, queue="alpha", claim=CLAIM, nack=Nack("ready", "shed"))
    assert (retry.args[-1], shed.args[-1]) == ("retried", "")


@pytest.mark.parametrize("script", lua_names())
def test_every_key_a_script_is_passed_hashes_to_one_cluster_slot(script: str) -> None:
    """Redis Cluster runs a script only when its KEYS share one slot: the CRC16 slot of every key
    of the script's sample call (every script has one, above) is the same."""
    call = SAMPLES[script]()
    slots = {key_slot(key.encode()) for key in call.keys}
    assert len(slots) <= 1, f"{script} passes keys of slots {sorted(slots)}: {list(call.keys)}"


# A command whose first argument is a key (the Lua scripts' whole vocabulary of them).
KEYED = re.compile(
    r"redis\.call\(\s*'(?!TIME'|PUBLISH'|SCRIPT')([A-Z]+)'\s*,\s*([^,)]+)", re.MULTILINE
)


@pytest.mark.parametrize("script", [*lua_names(), "lib"])
def test_no_script_builds_a_key_name(script: str) -> None:
    """Every key a script touches comes from its KEYS, from an index of its own slot (members and
    values that `keys.py` built), or from a variable holding one: never a literal or a `..`."""
    built = [
        f"{command} {key.strip()}"
        for command, key in KEYED.findall(read_lua(script))
        if ".." in key or "'" in key or '"' in key
    ]
    assert built == [], f"{script}.lua builds key names: {built}"


def test_the_key_check_sees_a_built_key() -> None:
    found = KEYED.findall("redis.call('HGET', KEYS[1] .. ':x', 'f')\nredis.call('TIME')")
    assert found == [("HGET", "KEYS[1] .. ':x'")]
