"""The queue registry: a queue joins the deployment's queue SET, and takes the job names paused
deployment-wide, before its first job; an enqueue into a queue that has not joined asks for it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from redis.asyncio.cluster import RedisCluster

from xjobs_redis.executor import Call, Command, Executor
from xjobs_redis.keys import Keys

JOIN = "join"  # enqueue.lua's answer for a queue without its join marker (nothing written)


async def join(executor: Executor, keys: Keys, queues: Sequence[str]) -> None:
    """Join `queues`: two round trips, each on one slot per command.

    First the deployment's slot: each queue enters the queue SET, then the SET of paused job
    names is read (in that order on one connection). A job-name pause writes that SET, then reads
    the queue SET (`xjobs_redis.pauses`), so of a pause and a join racing, one sees the other.
    Then each queue's slot: the paused job names, then the join marker, so a queue's first job is
    never claimable before its paused names are in place.
    """
    queues_key, paused_key, names = keys.queues(), keys.paused_jobs(), sorted(set(queues))
    first: list[Command] = [
        lambda pipe: pipe.sadd(queues_key, *names),
        lambda pipe: pipe.smembers(paused_key),
    ]
    _, members = await executor.batch(first)
    paused = sorted(map(str, members))
    second: list[Command] = []
    for queue in names:
        second += _mark(keys, queue, paused)
    await executor.batch(second)


def _mark(keys: Keys, queue: str, paused: list[str]) -> list[Command]:
    names_key, marker = keys.paused_names(queue), keys.joined(queue)
    commands: list[Command] = []
    if paused:
        commands.append(lambda pipe: pipe.sadd(names_key, *paused))
    commands.append(lambda pipe: pipe.set(marker, "1"))
    return commands


def _inline_join(keys: Keys, queue: str) -> list[Command]:
    """A join as three commands in front of the queue's enqueue, for one server (not a Cluster:
    the COPY spans two slots): the queue enters the queue SET, the SET of paused job names is
    copied over the queue's, then the marker is set, in that order on one connection (the same
    order, and so the same race with a pause, as `join`)."""
    queues_key, paused_key = keys.queues(), keys.paused_jobs()
    names_key, marker = keys.paused_names(queue), keys.joined(queue)
    return [
        lambda pipe: pipe.sadd(queues_key, queue),
        lambda pipe: pipe.copy(paused_key, names_key, replace=True),
        lambda pipe: pipe.set(marker, "1"),
    ]


class QueueRegistry:
    """The enqueues of one driver, and the queues it has seen joined.

    On one Redis server a queue this process has not seen joined joins in the enqueue's own
    round trip (`_inline_join` in front of its script), so every enqueue is one round trip. On a
    Cluster the enqueue goes alone; a queue that answers 'join' joins (`join`, two round trips)
    and is sent again, once per queue for the deployment's life.
    """

    def __init__(self, executor: Executor, keys: Keys) -> None:
        self._x = executor
        self._k = keys
        self._inline = not isinstance(executor.client, RedisCluster)
        self._joined: set[str] = set()

    async def enqueue(self, batch: Sequence[tuple[str, Call]]) -> list[Any]:
        """Run one `enqueue.lua` call per queue (`(queue, call)` pairs), pipelined when there
        are several; the queues that answer 'join' (a queue's first enqueue on a Cluster, or one
        after the server lost its keys) join and their calls run again."""
        fresh = sorted({q for q, _ in batch if q not in self._joined}) if self._inline else []
        joins = [command for queue in fresh for command in _inline_join(self._k, queue)]
        replies = await _send(self._x, joins, [call for _, call in batch])
        unjoined = [i for i, reply in enumerate(replies) if reply == JOIN]
        if unjoined:
            await join(self._x, self._k, [batch[i][0] for i in unjoined])
            again = await _send(self._x, [], [batch[i][1] for i in unjoined])
            for i, reply in zip(unjoined, again, strict=True):
                replies[i] = reply
        self._joined.update(queue for queue, _ in batch)
        return replies


async def _send(executor: Executor, commands: list[Command], calls: list[Call]) -> list[Any]:
    """The calls' replies: one EVALSHA alone, else one pipeline with `commands` in front."""
    if len(calls) == 1 and not commands:
        return [await executor.run(calls[0])]
    return (await executor.batch([*commands, *calls]))[len(commands) :]
