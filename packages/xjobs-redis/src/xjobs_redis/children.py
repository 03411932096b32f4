"""The Redis child store: a group in a slot of its parent run's own (`{<prefix>:grp:<run id>}`),
each child a plain job of its queue linked to it, the parent's park and wake across the slots."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence

from xjobs.contract.children import ChildGroup, ChildRow, Family, GroupState
from xjobs.contract.driver import Claim, Nack, NewJob
from xjobs_redis.calls import children as calls
from xjobs_redis.driver import RedisJobDriver
from xjobs_redis.endings import ChildEndings
from xjobs_redis.executor import Command, Executor
from xjobs_redis.keys import Keys, job_id_of
from xjobs_redis.locate import locate, queue_of, reader
from xjobs_redis.rows import job_state, stored_columns

SIBLING_FAILED = "cancelled: sibling failed"
GROUP_FIELDS = ("total", "spawned", "ended", "failed", "first_failed", "resolved")


class RedisChildren:
    """`ChildStore` over the group's keys and the children's job HASHes. Every step keeps to one
    slot; what spans slots is several steps in an order that loses no ending and no wake (the
    README's "Child jobs")."""

    def __init__(self, executor: Executor, keys: Keys, jobs: RedisJobDriver) -> None:
        self._x = executor
        self._k = keys
        self._jobs = jobs
        self._endings: ChildEndings = jobs.endings

    async def spawn(
        self, claim: Claim, group: ChildGroup, first_index: int, rows: Sequence[NewJob]
    ) -> int | None:
        """The parent's fence, the page's group and members (the group's slot), the children
        (their queues' slots), the spawned count, then the parent's state read again: a cancel
        that raced the page cascades to the children its own cascade may have missed."""
        queue = await queue_of(self._x, self._k, claim)
        if (
            queue is None
            or await self._x.run(calls.child_fence(self._k, queue=queue, claim=claim)) != 1
        ):
            return None
        run, step = group.parent_run_id, group.step
        child_keys = [self._k.job(row.queue, row.id) for row in rows]
        await self._x.run(
            calls.child_group(self._k, group=group, first_index=first_index, child_keys=child_keys)
        )
        links = [
            json.dumps(
                {
                    "x": self._k.child_endings(row.queue),
                    "r": run,
                    "s": step,
                    "i": first_index + offset,
                    "p": group.parent_id,
                    "pk": self._k.job(queue, group.parent_id),
                },
                ensure_ascii=False,
                separators=(",", ":"),
            )
            for offset, row in enumerate(rows)
        ]
        await self._jobs.enqueue(rows, links=links)
        upto = first_index + len(rows)
        spawned = await self._x.run(
            calls.child_spawned(self._k, parent_run_id=run, step=step, upto=upto)
        )
        parent = self._k.job(queue, claim.job_id)
        ((state,),) = await self._x.batch([_hmget(parent, ("state",))])
        if state == "cancelled" and not group.detached:
            await self._endings.cascade([parent])
        return int(spawned)

    async def group(self, parent_run_id: str, step: str) -> GroupState | None:
        key = self._k.group(parent_run_id, step)
        ((total, spawned, ended, failed, first, resolved),) = await self._x.batch(
            [_hmget(key, GROUP_FIELDS)]
        )
        if total is None:
            return None
        return GroupState(
            int(total),
            int(spawned),
            int(ended),
            int(failed),
            None if first is None else int(first),
            resolved == "1",
        )

    async def park(self, claim: Claim, parent_run_id: str, step: str, nack: Nack) -> bool:
        """The group marked parked (its slot), answering whether it resolved; the parent parked
        under its fence, due now if it did (its slot); then the group read again, and the parent
        woken if it resolved in between (its ending saw the park's mark, but may have tried the
        wake before the parent waited)."""
        queue = await queue_of(self._x, self._k, claim)
        if queue is None:
            return False
        mark = calls.child_parked(self._k, parent_run_id=parent_run_id, step=step)
        resolved = await self._x.run(mark) == 1
        group = self._k.group(parent_run_id, step)
        park = calls.child_park(
            self._k,
            now=self._x.now(),
            queue=queue,
            claim=claim,
            nack=nack,
            run_at_ms=None if resolved else nack.run_at_ms,
            group=group,
        )
        if await self._x.run(park) != 1:
            return False
        if not resolved:
            ((again,),) = await self._x.batch([_hmget(group, ("resolved",))])
            if again == "1":
                wake = calls.child_wake(
                    self._k,
                    now=self._x.now(),
                    queue=queue,
                    parent_id=claim.job_id,
                    parent_run_id=parent_run_id,
                    step=step,
                )
                await self._x.run(wake)
        return True

    async def children_page(
        self, parent_run_id: str, step: str, after_index: int, limit: int
    ) -> list[ChildRow]:
        key = self._k.group_members(parent_run_id, step)
        low = max(after_index + 1, 0)

        def page(pipe: object) -> object:
            return pipe.zrangebyscore(key, low, "+inf", start=0, num=limit, withscores=True)  # type: ignore[attr-defined]

        (members,) = await self._x.batch([page])
        found = [(str(member), int(score)) for member, score in members]
        rows = await self._x.batch([reader("hgetall", member) for member, _ in found])
        out: list[ChildRow] = []
        for (member, index), fields in zip(found, rows, strict=True):
            job_id = job_id_of(member)
            row = stored_columns(
                {str(f): str(v) for f, v in dict(fields).items()},
                job_id,
                self._k.queue_of_job(member),
            )
            if row:
                out.append(
                    ChildRow(
                        index,
                        job_id,
                        job_state(row["state"]),
                        row.get("result"),
                        row.get("last_error"),
                    )
                )
        return out

    async def cancel_children(self, claim: Claim, parent_run_id: str, step: str) -> int | None:
        queue = await queue_of(self._x, self._k, claim)
        if (
            queue is None
            or await self._x.run(calls.child_fence(self._k, queue=queue, claim=claim)) != 1
        ):
            return None
        key = self._k.group_members(parent_run_id, step)
        (members,) = await self._x.batch([lambda pipe: pipe.zrange(key, 0, -1)])
        cancelled = await self._endings.cancel([str(m) for m in members], SIBLING_FAILED)
        return len(cancelled) + await self._endings.cascade(cancelled)

    async def family(self, job_id: str) -> Family | None:
        queue = await locate(self._x, self._k, job_id)
        if queue is None:
            return None
        key = self._k.job(queue, job_id)
        ((link,),) = await self._x.batch([_hmget(key, ("link",))])
        parent = None if link is None else str(json.loads(str(link))["p"])
        kids = await self._endings.children([key])
        states = await self._x.batch([_hmget(kid, ("state",)) for kid in kids])
        counts = Counter(str(s[0] or "ready") for s in states)
        return Family(parent, dict(sorted(counts.items())))


def _hmget(key: str, fields: Sequence[str]) -> Command:
    return lambda pipe: pipe.hmget(key, list(fields))
