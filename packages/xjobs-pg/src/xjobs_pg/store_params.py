"""The store statements' parameters (workers, slots, steps, events, scheduler): a record each, whose one `bind()` is its `$n` order."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from xjobs.contract.driver import Claim, NewJob
from xjobs.contract.stores import EventWait, SlotHolder, StepRecord, WorkerInfo
from xjobs_pg.params import Bound, fence, job_columns

# -- stores.sql ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AnnounceParams:
    """`worker_announce`: $1 now, $2 id, $3 host, $4 pid, $5 queues, $6 started, $7 TTL."""

    now_ms: int | None
    info: WorkerInfo
    ttl_ms: int

    def bind(self) -> Bound:
        i = self.info
        return (self.now_ms, i.id, i.host, i.pid, list(i.queues), i.started_at_ms, self.ttl_ms)


@dataclass(frozen=True, slots=True)
class BeatParams:
    """`worker_beat`: $1 now, $2 worker id, $3 TTL."""

    now_ms: int | None
    worker_id: str
    ttl_ms: int

    def bind(self) -> Bound:
        return (self.now_ms, self.worker_id, self.ttl_ms)


@dataclass(frozen=True, slots=True)
class NowParams:
    """`worker_list`: $1 now."""

    now_ms: int | None

    def bind(self) -> Bound:
        return (self.now_ms,)


@dataclass(frozen=True, slots=True)
class SlotAcquireParams:
    """`slot_acquire`: $1 now, $2 key, $3 job id, $4 limit, $5 claims, $6 TTL."""

    now_ms: int | None
    key: str
    holder: SlotHolder
    limit: int
    ttl_ms: int

    def bind(self) -> Bound:
        h = self.holder
        return (self.now_ms, self.key, h.job_id, self.limit, h.claims, self.ttl_ms)


@dataclass(frozen=True, slots=True)
class SlotRenewParams:
    """`slot_renew`: $1 now, $2 key, $3 job id, $4 claims, $5 TTL."""

    now_ms: int | None
    key: str
    holder: SlotHolder
    ttl_ms: int

    def bind(self) -> Bound:
        h = self.holder
        return (self.now_ms, self.key, h.job_id, h.claims, self.ttl_ms)


@dataclass(frozen=True, slots=True)
class SlotReleaseParams:
    """`slot_release`: $1 now, $2 key, $3 job id, $4 claims."""

    now_ms: int | None
    key: str
    holder: SlotHolder

    def bind(self) -> Bound:
        return (self.now_ms, self.key, self.holder.job_id, self.holder.claims)


@dataclass(frozen=True, slots=True)
class SlotHoldersParams:
    """`slot_holders`: $1 now, $2 key."""

    now_ms: int | None
    key: str

    def bind(self) -> Bound:
        return (self.now_ms, self.key)


@dataclass(frozen=True, slots=True)
class ProbeParams:
    """`wake_probe`: $1 the channel, $2 the probe payload."""

    channel: str
    payload: str

    def bind(self) -> Bound:
        return (self.channel, self.payload)


# -- steps.sql -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class StepPutParams:
    """`step_put`: $1..$3 the claim, $4 run id, $5 name, $6 status, $7 result, $8 error, $9 position, $10 created."""

    claim: Claim
    step: StepRecord

    def bind(self) -> Bound:
        s = self.step
        return (
            *fence(self.claim),
            s.run_id,
            s.name,
            s.status,
            s.result,
            s.error,
            s.position,
            s.created_at_ms,
        )


# -- events.sql ------------------------------------------------------------------------------------


def tenant_scope(tenant: str | None) -> str:
    """An event's tenant as the tables store it: the untenanted scope is the empty string."""
    return "" if tenant is None else tenant


@dataclass(frozen=True, slots=True)
class SendParams:
    """`event_send`: $1 the bus clock, $2 id, $3 name, $4 payload, $5 tenant."""

    now_ms: int | None
    event_id: str
    name: str
    payload: str
    tenant: str | None

    def bind(self) -> Bound:
        return (self.now_ms, self.event_id, self.name, self.payload, tenant_scope(self.tenant))


@dataclass(frozen=True, slots=True)
class EventWakeParams:
    """`event_wake`: $1 the channel, $2 the woken queues."""

    channel: str
    queues: list[str]

    def bind(self) -> Bound:
        return (self.channel, self.queues)


@dataclass(frozen=True, slots=True)
class FindParams:
    """`event_find`: $1 name, $2 match, $3 since, $4 tenant."""

    name: str
    match: str
    since_ms: int
    tenant: str | None

    def bind(self) -> Bound:
        return (self.name, self.match, self.since_ms, tenant_scope(self.tenant))


@dataclass(frozen=True, slots=True)
class RegisterParams:
    """`event_register`: $1 job id, $2 run id, $3 queue, $4 step, $5 event, $6 match, $7 since,
    $8 deadline, $9 tenant."""

    wait: EventWait

    def bind(self) -> Bound:
        w = self.wait
        scope = tenant_scope(w.tenant)
        return (
            w.job_id,
            w.run_id,
            w.queue,
            w.step,
            w.event,
            w.match,
            w.since_ms,
            w.deadline_ms,
            scope,
        )


# -- scheduler.sql ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TasksParams:
    """`task_watermarks`, `task_paused`, `task_fires`: $1 the task names (`task_fires`: null for all)."""

    tasks: Sequence[str] | None

    def bind(self) -> Bound:
        return (None if self.tasks is None else list(self.tasks),)


@dataclass(frozen=True, slots=True)
class ArmParams:
    """`task_arm`: $1 task, $2 the watermark read (null: none yet), $3 the new watermark."""

    task: str
    previous_ms: int | None
    watermark_ms: int

    def bind(self) -> Bound:
        return (self.task, self.previous_ms, self.watermark_ms)


@dataclass(frozen=True, slots=True)
class FireParams:
    """`task_fire`: $1 now, $2 task, $3 the watermark read, $4 the occurrence, $5..$17 the job, $18 the queues to wake, $19 the channel."""

    now_ms: int | None
    task: str
    previous_ms: int | None
    occurrence_ms: int
    job: NewJob
    wake: list[str]
    channel: str

    def bind(self) -> Bound:
        return (
            self.now_ms,
            self.task,
            self.previous_ms,
            self.occurrence_ms,
            *job_columns(self.job),
            self.wake,
            self.channel,
        )


@dataclass(frozen=True, slots=True)
class PauseParams:
    """`task_pause`: $1 now, $2 task."""

    now_ms: int | None
    task: str

    def bind(self) -> Bound:
        return (self.now_ms, self.task)


@dataclass(frozen=True, slots=True)
class LeaderAcquireParams:
    """`leader_acquire`: $1 now, $2 election, $3 candidate, $4 TTL."""

    now_ms: int | None
    name: str
    candidate: str
    ttl_ms: int

    def bind(self) -> Bound:
        return (self.now_ms, self.name, self.candidate, self.ttl_ms)


@dataclass(frozen=True, slots=True)
class LeaderReleaseParams:
    """`leader_release`: $1 election, $2 candidate."""

    name: str
    candidate: str

    def bind(self) -> Bound:
        return (self.name, self.candidate)
