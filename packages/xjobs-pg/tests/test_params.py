"""Each statement is bound from one params record: one value per placeholder, each of the type the server reads there."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest

from xjobs.contract.children import ChildGroup
from xjobs.contract.driver import Claim, ClaimOptions, Nack
from xjobs.contract.introspection import COUNTED_OUTCOMES, JobFilter, JobPosition
from xjobs.contract.rates import RateBucket
from xjobs.contract.retention import PURGE_STORES, Retention
from xjobs.contract.stores import EventWait, SlotHolder, StepRecord, WorkerInfo
from xjobs.contract.webhooks import LedgerPolicy, WebhookAttempt
from xjobs.ids import new_id
from xjobs.run.settle import ending, parking, retrying, shedding
from xjobs.testing.rows import new_job
from xjobs_pg.backfills import BackfillParams
from xjobs_pg.children import (
    CancelChildrenParams,
    GroupKey,
    PageParams,
    ParkParams,
    SpawnParams,
)
from xjobs_pg.operator_params import (
    BulkParams,
    CancelManyParams,
    CounterParams,
    ListParams,
    PauseRowParams,
    PromoteParams,
    QueueCountsParams,
    ResumeParams,
    RollupParams,
    WakingBulkParams,
)
from xjobs_pg.params import (
    NO_PARAMS,
    AckManyParams,
    AckParams,
    CancelParams,
    ClaimParams,
    CompleteParams,
    EnqueueOneParams,
    EnqueueParams,
    FlowEnqueueParams,
    HeartbeatParams,
    MarkParams,
    NackParams,
    One,
    Params,
    ProgressParams,
    RelayClaimParams,
    RequeueParams,
    StageParams,
    UnwatchParams,
    WatchParams,
)
from xjobs_pg.purge import PURGE_COUNT_ARITY, PurgeParams
from xjobs_pg.rates import GrantsParams, RateParams, ReserveParams, SpentParams
from xjobs_pg.schema import quote_schema
from xjobs_pg.sql import Statements
from xjobs_pg.store_params import (
    AnnounceParams,
    ArmParams,
    BeatParams,
    EventWakeParams,
    FindParams,
    FireParams,
    LeaderAcquireParams,
    LeaderReleaseParams,
    NowParams,
    PauseParams,
    ProbeParams,
    RegisterParams,
    SendParams,
    SlotAcquireParams,
    SlotHoldersParams,
    SlotReleaseParams,
    SlotRenewParams,
    StepPutParams,
    TasksParams,
)
from xjobs_pg.testing import opened, session
from xjobs_pg.webhooks import AttemptsParams, RecordParams

NOW = 1_700_000_000_000
JOB = new_job(tenant_id="org-1", run_at_ms=NOW, enqueued_by="user-1", traceparent="00-ab-cd-01")
CLAIM = Claim(job_id=JOB.id, worker_id="worker-1", claims=2)
GROUP = ChildGroup(JOB.id, JOB.run_id, "default", "kids", 1, wait=True, fail_fast=True)
HOLDER = SlotHolder(job_id=JOB.id, claims=2)
WAIT = EventWait(JOB.id, JOB.run_id, "default", "wait", "paid", '{"n": 1}', NOW, NOW + 1)
STEP = StepRecord(JOB.run_id, "charge", "error", "1", "boom", 0, NOW)
WORKER = WorkerInfo("worker-1", "host", 42, ("default",), NOW, NOW)
OPTIONS = ClaimOptions("worker-1", {"default": 2}, 30_000, presence_ttl_ms=60_000, limit=2)
WHERE = JobFilter(("dead",), "default", "test_job", "org-1", NOW - 1, NOW + 1)
BULK = BulkParams(WHERE, ["dead"], NOW, 10, 100)

# One record per statement, every value given (a null would prove nothing about its place).
# Retention: one pass's cut, a per-job keep included.
CUT = Retention().cut(NOW, {"audit": 1_000})
RATE = RateBucket("rate|job|a", 100.0, 2)
WEBHOOK_ATTEMPT = WebhookAttempt(
    "endpoint-1", "msg_1", JOB.id, 2, "failed", 503, 120, "busy", "XJOBS_WEBHOOK_FAILED: 503", NOW
)
SAMPLES: dict[str, Params] = {
    "enqueue": EnqueueParams(NOW, [JOB], ["default"], "channel"),
    "enqueue_fresh": EnqueueParams(NOW, [JOB], ["default"], "channel"),
    "enqueue_one": EnqueueOneParams(NOW, JOB, ["default"], "channel"),
    "enqueue_flow": FlowEnqueueParams(
        EnqueueParams(NOW, [replace(JOB, debounce_ms=1, throttle_ms=1)], ["default"], "channel")
    ),
    "claim": ClaimParams(NOW, OPTIONS, "lapsed"),
    "ack": AckParams(NOW, CLAIM),
    "complete": CompleteParams(NOW, CLAIM, '{"total": 1}'),
    "ack_many": AckManyParams(NOW, [CLAIM]),
    "nack": NackParams(NOW, CLAIM, retrying("boom", NOW)),
    "heartbeat": HeartbeatParams(NOW, CLAIM, 30_000),
    "record_progress": ProgressParams(NOW, CLAIM, 0.5),
    "get_job": One(JOB.id),
    "cancel": CancelParams(NOW, JOB.id, "cancelled"),
    "requeue": RequeueParams(NOW, JOB.id),
    "live_holder": One(JOB.id),
    "promote": PromoteParams(NOW, JOB.id, "channel"),
    "remove": One(JOB.id),
    "list_jobs": ListParams(WHERE, ["dead"], JobPosition(NOW, JOB.id), 50),
    "job_errors": One(JOB.id),
    "queue_counts": QueueCountsParams(NOW, 1_000),
    "cancel_many": CancelManyParams(BULK, "cancelled"),
    "promote_many": WakingBulkParams(BULK, "channel"),
    "remove_many": BULK,
    "retry_many": WakingBulkParams(BULK, "channel"),
    "counter_buckets": CounterParams("minute", NOW),
    "rollup_counters": RollupParams(NOW),
    "pause": PauseRowParams(NOW, "queue", "default"),
    "resume": ResumeParams("queue", "default", "channel"),
    "pause_list": NO_PARAMS,
    "index_scans_only": NO_PARAMS,
    "worker_announce": AnnounceParams(NOW, WORKER, 60_000),
    "worker_beat": BeatParams(NOW, "worker-1", 60_000),
    "worker_forget": One("worker-1"),
    "worker_list": NowParams(NOW),
    "slot_lock": One("job:a"),
    "slot_acquire": SlotAcquireParams(NOW, "job:a", HOLDER, 1, 60_000),
    "slot_renew": SlotRenewParams(NOW, "job:a", HOLDER, 60_000),
    "slot_release": SlotReleaseParams(NOW, "job:a", HOLDER),
    "slot_holders": SlotHoldersParams(NOW, "job:a"),
    "wake_probe": ProbeParams("channel", "probe:1"),
    "installed_version": NO_PARAMS,
    "backend_pid": NO_PARAMS,
    "step_put": StepPutParams(CLAIM, STEP),
    "step_list": One(JOB.run_id),
    "event_lock": One("paid"),
    "event_now": NO_PARAMS,
    "event_send": SendParams(NOW, new_id(), "paid", '{"n": 1}', "org-1"),
    "event_wake": EventWakeParams("channel", ["default"]),
    "event_find": FindParams("paid", '{"n": 1}', NOW, None),
    "event_register": RegisterParams(WAIT),
    "task_watermarks": TasksParams(["t"]),
    "task_arm": ArmParams("t", NOW, NOW + 1),
    "task_fire": FireParams(NOW, "t", NOW, NOW + 1, JOB, ["default"], "channel"),
    "task_fires": TasksParams(["t"]),
    "task_paused": TasksParams(["t"]),
    "task_pause": PauseParams(NOW, "t"),
    "task_resume": One("t"),
    "leader_acquire": LeaderAcquireParams(NOW, "scheduler", "alpha", 1_000),
    "leader_release": LeaderReleaseParams("scheduler", "alpha"),
    "advisory_acquire": One("xjobs.scheduler"),
    "advisory_release": One("xjobs.scheduler"),
    "outbox_stage": StageParams(NOW, [JOB], ["outbox"], "channel"),
    "outbox_claim": RelayClaimParams(NOW, "relay-1", 10, 30_000),
    "outbox_mark": MarkParams(NOW, "relay-1", [JOB.id], 1_000, 10),
    "outbox_pending": NO_PARAMS,
    "result_read": One(JOB.id),
    "result_watch": WatchParams(JOB.id, "token-1", "channel", NOW, 60_000),
    "result_state": One(JOB.id),
    "result_unwatch": UnwatchParams(JOB.id, "token-1"),
    "webhook_record": RecordParams(WEBHOOK_ATTEMPT, LedgerPolicy(disable_after=3, keep=10)),
    "webhook_state": One("endpoint-1"),
    "webhook_enable": One("endpoint-1"),
    "webhook_attempts": AttemptsParams("endpoint-1", 10),
    "rate_ensure": One(["rate|job|a"]),
    "rate_acquire_all": GrantsParams(NOW, [[RATE], [RATE]]),
    "rate_acquire": GrantsParams(NOW, [[RATE], [RATE]]),
    "rate_reserve": ReserveParams(NOW, [RATE], 8, 200),
    "rate_abandon": RateParams(NOW, [RATE]),
    "rate_spent": SpentParams(NOW, "rate|job|a", 100.0),
    "backfill_begin": BackfillParams(
        (NOW, JOB.run_id, JOB.id, "fill", "c1", "production", "org-1")
    ),
    "backfill_checkpoint": BackfillParams((NOW, JOB.run_id, "42", 3, 1)),
    "backfill_finish": BackfillParams((NOW, JOB.run_id, "completed", "boom")),
    "backfill_get": One(JOB.run_id),
    "backfill_rows": BackfillParams(("fill", 50)),
    "backfill_completed": BackfillParams(("fill", "c1", "production", "org-1")),
    "spawn_children": SpawnParams(NOW, CLAIM, GROUP, 0, [JOB], ["default"], "channel"),
    "child_group": GroupKey(JOB.run_id, "kids"),
    "park_children": ParkParams(NOW, CLAIM, parking(NOW), JOB.run_id, "kids"),
    "child_page": PageParams(JOB.run_id, "kids", -1, 100),
    "cancel_children": CancelChildrenParams(NOW, CLAIM, JOB.run_id, "kids"),
    "cancel_descendants": CancelParams(NOW, JOB.id, "cancelled"),
    "family": One(JOB.id),
    **{f"purge_{store}": PurgeParams.of(store, CUT, 100) for store in PURGE_STORES},
    **{
        f"purge_{store}_count": PurgeParams.of(store, CUT, None).first(PURGE_COUNT_ARITY[store])
        for store in PURGE_STORES
    },
}

PLACEHOLDER = re.compile(r"\$(\d+)")
# What a bound Python value may be, by the type the server infers for its placeholder.
ACCEPTS: dict[str, tuple[type, ...]] = {
    "int2": (int,),
    "int4": (int,),
    "int8": (int,),
    "float8": (float,),
    "text": (str,),
    "uuid": (str,),
    "jsonb": (str,),
    "bool": (bool,),
}


def placeholders(sql: str) -> int:
    return max((int(n) for n in PLACEHOLDER.findall(sql)), default=0)


def fits(value: object, type_name: str) -> bool:
    if value is None:
        return True
    if type_name.endswith("[]"):
        return isinstance(value, list) and all(fits(v, type_name[:-2]) for v in value)
    if isinstance(value, bool) and type_name != "bool":
        return False
    return isinstance(value, ACCEPTS[type_name])


def test_every_statement_has_a_params_record() -> None:
    assert sorted(SAMPLES) == Statements(quote_schema("xjobs")).names()


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_a_record_binds_one_value_per_placeholder(name: str) -> None:
    sql = Statements(quote_schema("xjobs"))[name]
    assert len(SAMPLES[name].bind()) == placeholders(sql)


@pytest.mark.parametrize(
    "nack",
    [retrying("boom", NOW), ending(True, "boom"), ending(False, None), parking(NOW), shedding(NOW)],
    ids=lambda nack: nack.outcome,
)
def test_a_nack_binds_the_state_and_error_the_settle_room_decided(nack: Nack) -> None:
    bound = NackParams(NOW, CLAIM, nack).bind()
    assert bound == (
        NOW,
        CLAIM.job_id,
        CLAIM.worker_id,
        CLAIM.claims,
        nack.state,
        nack.run_at_ms,
        0 if nack.counts_as_attempt else 1,
        nack.error is not None,
        nack.error,
        nack.state in ("dead", "failed"),
        nack.outcome if nack.outcome in COUNTED_OUTCOMES else None,
    )


@pytest.mark.asyncio
async def test_each_bound_value_has_the_type_the_server_reads_in_its_place(schema: str) -> None:
    async with opened(schema), session() as conn:
        sql = Statements(quote_schema(schema))
        misfits: list[str] = []
        for name, params in sorted(SAMPLES.items()):
            types = [t.name for t in (await conn.prepare(sql[name])).get_parameters()]
            misfits += [
                f"{name} ${i}: {value!r} is no {type_name}"
                for i, (value, type_name) in enumerate(zip(params.bind(), types, strict=True), 1)
                if not fits(value, type_name)
            ]
    assert misfits == []
