"""A child's ending carried from its queue's slot to its group's (and the parent's wake), and the
cancel cascade down a cancelled job's live non-detached descendants."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from xjobs.contract.driver import LIVE_STATES
from xjobs_redis.calls import children as calls
from xjobs_redis.calls import jobs as job_calls
from xjobs_redis.executor import Call, Command, Executor
from xjobs_redis.keys import Keys, job_id_of
from xjobs_redis.locate import queues, reader
from xjobs_redis.rows import first_present, stored_names

PARENT_CANCELLED = "cancelled: parent cancelled"


class ChildEndings:
    """Each child's terminal script records its first ending in its queue's `child_endings` HASH
    (the same script as the ack, the nack, the cancel or the burial). `deliver` then applies each
    to its group (`child_end.lua`: the child counted once, by its id in the group's ended SET),
    wakes the parent when the group resolved and the parent parked on it (`child_wake.lua`), and
    drops the ending last. A process killed between these steps leaves the ending recorded; any
    later `deliver` of that queue, or the `sweep`, applies it again: counted once, woken once."""

    def __init__(self, executor: Executor, keys: Keys) -> None:
        self._x = executor
        self._k = keys

    async def deliver(self, queue_names: Iterable[str]) -> int:
        """Apply every ending recorded in the queues; answers how many were applied."""
        names = sorted(set(queue_names))
        if not names:
            return 0
        return await self.apply(names, await self._x.batch(self.reads(names)))

    def reads(self, names: Sequence[str]) -> list[Call | Command]:
        """The reads of the endings recorded in the queues `names` (to ride another round trip)."""
        return [reader("hgetall", self._k.child_endings(q)) for q in names]

    async def apply(self, names: Sequence[str], read: Sequence[Any]) -> int:
        """Apply the endings `reads(names)` answered (`read`); answers how many were applied."""
        pending = [
            (queue, str(child), json.loads(str(value)))
            for queue, recorded in zip(names, read, strict=True)
            for child, value in dict(recorded).items()
        ]
        if not pending:
            return 0
        ends: list[Call | Command] = []
        for _, child, ending in pending:
            link = json.loads(ending["link"])
            ends.append(
                calls.child_end(
                    self._k,
                    parent_run_id=link["r"],
                    step=link["s"],
                    child_id=child,
                    index=link["i"],
                    state=ending["state"],
                )
            )
        now = self._x.now()
        wakes: list[Call | Command] = [
            calls.child_wake(
                self._k,
                now=now,
                queue=str(answer[1]),
                parent_id=str(answer[2]),
                parent_run_id=str(answer[3]),
                step=json.loads(ending["link"])["s"],
            )
            for (_, _, ending), answer in zip(pending, await self._x.batch(ends), strict=True)
            if int(answer[0]) == 1
        ]
        if wakes:
            await self._x.batch(wakes)
        await self._x.batch([_drop(self._k.child_endings(q), c) for q, c, _ in pending])
        return len(pending)

    async def sweep(self) -> int:
        """Deliver every queue's endings (those a killed process left between its steps)."""
        return await self.deliver(await queues(self._x, self._k))

    async def held(self, links: Sequence[str]) -> set[str]:
        """Which of the children's `links` name a live parent (retention keeps such a child)."""
        if not links:
            return set()
        parents = [json.loads(link)["pk"] for link in links]
        states = await self._x.batch(
            [_hmget(key, ("state", "c", "created_at_ms")) for key in parents]
        )
        return {
            link
            for link, (state, short, created) in zip(links, states, strict=True)
            if (short is not None or created is not None) and (state or "ready") in LIVE_STATES
        }

    async def forget(self, jobs: Sequence[tuple[str, str, str]]) -> None:
        """The child groups of the purged jobs among `jobs` ((queue, id, run id)) go with them."""
        if not jobs:
            return
        present = await self._x.batch([reader("exists", self._k.job(q, j)) for q, j, _ in jobs])
        runs = sorted({run for (_, _, run), there in zip(jobs, present, strict=True) if not there})
        steps = await self._x.batch([_smembers(self._k.run_groups(run)) for run in runs])
        drops: list[Call | Command] = []
        for run, found in zip(runs, steps, strict=True):
            keys = [self._k.run_groups(run)]
            for step in map(str, found):
                keys += [
                    self._k.group(run, step),
                    self._k.group_members(run, step),
                    self._k.group_ended(run, step),
                ]
            drops.append(_delete(keys))
        if drops:
            await self._x.batch(drops)

    async def cascade(self, job_keys: Sequence[str]) -> int:
        """Cancel the live non-detached descendants of the cancelled jobs `job_keys`, level by
        level, delivering each level's endings; answers how many jobs it cancelled."""
        moved, level = 0, list(job_keys)
        while level:
            kids = await self.children(level, attached_only=True)
            level = await self.cancel(kids, PARENT_CANCELLED)
            moved += len(level)
        return moved

    async def cancel(self, job_keys: Sequence[str], error: str) -> list[str]:
        """Cancel the live jobs among `job_keys` (one `cancel.lua` a queue) and deliver their
        endings; answers the keys of those cancelled."""
        by_queue: dict[str, list[str]] = {}
        for key in job_keys:
            by_queue.setdefault(self._k.queue_of_job(key), []).append(key)
        if not by_queue:
            return []
        now = self._x.now()
        batch: list[Call | Command] = [
            job_calls.cancel(
                self._k,
                now=now,
                queue=q,
                job_ids=[job_id_of(key) for key in keys],
                error=error,
                answer_records=False,
            )
            for q, keys in by_queue.items()
        ]
        cancelled = [
            key
            for keys, reply in zip(by_queue.values(), await self._x.batch(batch), strict=True)
            for key, answer in zip(keys, reply, strict=True)
            if str(answer[0]) == "cancelled"
        ]
        await self.deliver(by_queue)
        return cancelled

    async def children(self, parents: Sequence[str], *, attached_only: bool = False) -> list[str]:
        """The job keys of the children of the jobs `parents` (of every group of their runs;
        only the groups not detached when `attached_only`)."""
        runs = [
            first_present(r)
            for r in await self._x.batch([_hmget(key, stored_names("run_id")) for key in parents])
        ]
        run_ids = sorted({run for run in runs if run is not None})
        steps = await self._x.batch([_smembers(self._k.run_groups(run)) for run in run_ids])
        groups = [
            (run, str(step)) for run, found in zip(run_ids, steps, strict=True) for step in found
        ]
        if not groups:
            return []
        reads: list[Call | Command] = []
        for run, step in groups:
            reads += [
                _hmget(self._k.group(run, step), ("detached",)),
                _members(self._k.group_members(run, step)),
            ]
        replies = await self._x.batch(reads)
        kids: list[str] = []
        for flags, members in zip(replies[0::2], replies[1::2], strict=True):
            if not (attached_only and flags[0] == "1"):
                kids += [str(member) for member in members]
        return kids


def _delete(keys: Sequence[str]) -> Command:
    return lambda pipe: pipe.delete(*keys)


def _drop(key: str, field: str) -> Command:
    return lambda pipe: pipe.hdel(key, field)


def _hmget(key: str, fields: Sequence[str]) -> Command:
    return lambda pipe: pipe.hmget(key, list(fields))


def _smembers(key: str) -> Command:
    return lambda pipe: pipe.smembers(key)


def _members(key: str) -> Command:
    def read(pipe: Any) -> Any:
        return pipe.zrange(key, 0, -1)

    return read
