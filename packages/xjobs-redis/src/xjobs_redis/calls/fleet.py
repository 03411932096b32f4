"""The fleet scripts' calls: the worker registry's rows and the concurrency slots."""

from __future__ import annotations

import json

from xjobs.contract.stores import SlotHolder, WorkerInfo
from xjobs_redis.executor import Arg, Call
from xjobs_redis.keys import Keys


def _member(holder: SlotHolder) -> str:
    """A holder as its slots ZSET member: owned by (job id, claim), never a bare counter."""
    return f"{holder.job_id}:{holder.claims}"


def _registry(k: Keys) -> list[str]:
    return [k.workers(), k.worker_info(), k.worker_seen()]


def worker_announce(k: Keys, *, now: str, info: WorkerInfo, ttl_ms: int) -> Call:
    """Write one worker's row (its details as JSON), expiring `ttl_ms` after now."""
    details = {
        "host": info.host,
        "pid": info.pid,
        "queues": list(info.queues),
        "started_at_ms": info.started_at_ms,
    }
    args: list[Arg] = [now, info.id, json.dumps(details, ensure_ascii=False), ttl_ms]
    return Call("worker_announce", _registry(k), args)


def worker_beat(k: Keys, *, now: str, worker_id: str, ttl_ms: int) -> Call:
    """Refresh an unexpired row (a claim pass sends this beside its claims)."""
    return Call("worker_beat", [k.workers(), k.worker_seen()], [now, worker_id, ttl_ms])


def worker_forget(k: Keys, *, worker_id: str) -> Call:
    """Remove one worker's row."""
    return Call("worker_forget", _registry(k), [worker_id])


def worker_list(k: Keys, *, now: str) -> Call:
    """Read the unexpired rows."""
    return Call("worker_list", _registry(k), [now])


def slot_acquire(
    k: Keys, *, now: str, key: str, holder: SlotHolder, limit: int, ttl_ms: int
) -> Call:
    """Take one of `limit` slots of `key` for `holder`, for `ttl_ms`."""
    return Call("slot_acquire", [k.slot(key)], [now, _member(holder), limit, ttl_ms])


def slot_renew(k: Keys, *, now: str, key: str, holder: SlotHolder, ttl_ms: int) -> Call:
    """Extend the holder's unexpired slot of `key` to now + `ttl_ms`."""
    return Call("slot_renew", [k.slot(key)], [now, _member(holder), ttl_ms])


def slot_release(k: Keys, *, now: str, key: str, holder: SlotHolder) -> Call:
    """Give the holder's slot of `key` back."""
    return Call("slot_release", [k.slot(key)], [now, _member(holder)])


def slot_holders(k: Keys, *, now: str, key: str) -> Call:
    """Read the unexpired holders of `key`."""
    return Call("slot_holders", [k.slot(key)], [now])
