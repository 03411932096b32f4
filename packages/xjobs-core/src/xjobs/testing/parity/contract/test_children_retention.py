"""Parity: retention and child jobs — a finished child of a live parent is kept, whatever its age
(the parent reads its result when it continues), and a purged parent takes its groups along."""

from __future__ import annotations

import pytest

from xjobs.contract.children import ChildGroup
from xjobs.contract.retention import Retention
from xjobs.run.child_rows import child_id
from xjobs.testing.parity.env import ParityEnv
from xjobs.testing.parity.family import needs_children

pytestmark = [pytest.mark.xjobs_parity, pytest.mark.requires("retention")]

PARENTS = "parity"
KIDS = "parity-kids"
TEN_DAYS_MS = 10 * 86_400_000


class TestRetentionOfChildren:
    async def test_a_live_parents_finished_child_stays_and_a_purged_parent_takes_its_group(
        self, parity: ParityEnv
    ) -> None:
        """Rule: the purge keeps a finished child while its parent is live (ready, running,
        waiting), however old; once the parent finished and is purged, the child goes too and the
        parent's group is gone."""
        needs_children(parity)
        children, retention = parity.backend.children, parity.backend.retention
        assert children is not None
        assert retention is not None
        await parity.enqueue(queue=PARENTS)
        parent = await parity.claim_one(PARENTS)
        group = ChildGroup(parent.id, parent.run_id, PARENTS, "one", 1, True, True)
        kid_id = child_id(parent.run_id, "one", 0)
        row = parity.new_job(id=kid_id, queue=KIDS, idempotency_key=f"child:{kid_id}")
        assert await children.spawn(parent.claim, group, 0, [row]) == 1
        kid = await parity.claim_one(KIDS)
        assert await parity.backend.jobs.ack(kid.claim)
        # every finished job is past its cut ten days from now
        later = Retention().cut(parity.clock.now_ms() + TEN_DAYS_MS)
        kept = await retention.purge("jobs", later, 100)
        page = await children.children_page(parent.run_id, "one", -1, 10)
        assert await parity.backend.jobs.ack(parent.claim)
        purged = await retention.purge("jobs", later, 100)
        state = await children.group(parent.run_id, "one")
        assert (kept, [r.state for r in page]) == (0, ["completed"])
        assert (purged, state) == (2, None)
