"""Pauses: the deployment's record of them, and the per-queue keys each queue's claim reads.

A pause is a field of the global pauses HASH (`queue|<name>` or `job|<name>` -> paused_at_ms),
which `pauses()` lists. The claim of a queue reads only its own slot, so a pause is also written
where that claim reads it: a queue's pause is its `paused` flag; a job name's pause is a member
of the global `paused_jobs` SET and of every known queue's `paused_names` SET, and a queue that
appears later copies `paused_jobs` when it joins the queue SET (`xjobs_redis.registry`). The
global records are written first and the queue SET read after them, so a queue that joins
meanwhile is covered either way. Each write is one command on one slot, pipelined: a crash between them leaves the
global record and the per-queue keys apart until the pause or resume is asked again.
"""

from __future__ import annotations

from xjobs.clock import Clock
from xjobs.contract.introspection import Pause, PauseKind
from xjobs_redis.executor import AnyPipeline, Command, Executor
from xjobs_redis.keys import Keys


def _field(kind: PauseKind, name: str) -> str:
    return f"{kind}|{name}"


class Pauses:
    """`pause`, `resume` and `pauses` of one backend."""

    def __init__(self, executor: Executor, keys: Keys, clock: Clock) -> None:
        self._x = executor
        self._k = keys
        self._clock = clock

    async def pause(self, kind: PauseKind, name: str) -> bool:
        """One round trip for a queue, two for a job name (the queue set, then each queue's SET)."""
        pauses, field, now = self._k.pauses(), _field(kind, name), self._clock.now_ms()
        first: list[Command] = [lambda pipe: pipe.hsetnx(pauses, field, now)]
        if kind == "queue":
            flag = self._k.paused(name)
            first.append(lambda pipe: pipe.set(flag, now))
            added, _ = await self._x.batch(first)
            return bool(added)
        queues, jobs = self._k.queues(), self._k.paused_jobs()
        first += [lambda pipe: pipe.sadd(jobs, name), lambda pipe: pipe.smembers(queues)]
        added, _, members = await self._x.batch(first)
        await self._x.batch([self._add(q, name) for q in sorted(map(str, members))])
        return bool(added)

    async def resume(self, kind: PauseKind, name: str) -> bool:
        """As `pause`; a resumed queue (every known queue, for a job name) is woken."""
        pauses, field, channel = self._k.pauses(), _field(kind, name), self._k.wake_channel()
        first: list[Command] = [lambda pipe: pipe.hdel(pauses, field)]
        if kind == "queue":
            flag = self._k.paused(name)
            first += [lambda pipe: pipe.delete(flag), _publish(channel, name)]
            removed, *_ = await self._x.batch(first)
            return bool(removed)
        queues, jobs = self._k.queues(), self._k.paused_jobs()
        first += [lambda pipe: pipe.srem(jobs, name), lambda pipe: pipe.smembers(queues)]
        removed, _, members = await self._x.batch(first)
        names = sorted(map(str, members))
        await self._x.batch([self._remove(q, name) for q in names] + [self._wake(q) for q in names])
        return bool(removed)

    async def pauses(self) -> list[Pause]:
        """Every pause, by kind then name (one `HGETALL`)."""
        key = self._k.pauses()
        (rows,) = await self._x.batch([lambda pipe: pipe.hgetall(key)])
        found: list[Pause] = []
        for field, at in dict(rows).items():
            kind, _, name = str(field).partition("|")
            if kind in ("queue", "job"):
                found.append(Pause("queue" if kind == "queue" else "job", name, int(at)))
        return sorted(found, key=lambda p: (p.kind, p.name))

    async def paused_queues(self) -> list[str]:
        """The names of the paused queues (a queue with no job yet is listed by its pause)."""
        return [p.name for p in await self.pauses() if p.kind == "queue"]

    def _add(self, queue: str, name: str) -> Command:
        key = self._k.paused_names(queue)

        def command(pipe: AnyPipeline) -> object:
            return pipe.sadd(key, name)

        return command

    def _remove(self, queue: str, name: str) -> Command:
        key = self._k.paused_names(queue)

        def command(pipe: AnyPipeline) -> object:
            return pipe.srem(key, name)

        return command

    def _wake(self, queue: str) -> Command:
        return _publish(self._k.wake_channel(), queue)


def _publish(channel: str, message: str) -> Command:
    """A pipelined PUBLISH, by the command's name: a cluster pipeline blocks its `publish`
    method, not the command."""

    def command(pipe: AnyPipeline) -> object:
        return pipe.execute_command("PUBLISH", channel, message)

    return command
