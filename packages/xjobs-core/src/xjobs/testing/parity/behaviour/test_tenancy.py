"""Parity: a job's tenant is the job's own, derived from its input, never the enqueuer's
(issue 40 item 4; semantics.md, "Enqueue and idempotency")."""

from __future__ import annotations

from datetime import timedelta

import pytest

from xjobs import Actor, JobContext, current_actor, job, run_with_context
from xjobs.errors import JobTenantMismatchError
from xjobs.testing.parity.env import ParityEnv
from xjobs.testing.parity.jobs import LEASE, QUEUE, Item, key_of, org_of, within
from xjobs.testing.parity.stored import stored_ids

pytestmark = pytest.mark.xjobs_parity

SHORT = timedelta(milliseconds=200)
# a key that omits the org: the namespace alone must keep two tenants apart
SHARED_KEY = "invoice-1"


class TestTheJobsOwnTenant:
    async def test_one_key_in_two_tenants_is_two_jobs(self, parity: ParityEnv) -> None:
        """Rule: the namespace is (name, the job's tenant, key): with no actor and a key that omits
        the org, tenant B's enqueue is never deduplicated onto tenant A's live job."""

        @job(tenant=org_of, idempotency_key=key_of, queue=QUEUE)
        async def body(ctx: JobContext, input: Item) -> None:
            return None

        async with parity.app([body]):
            a = await body.enqueue(Item(org="org-a", key=SHARED_KEY))
            b = await body.enqueue(Item(org="org-b", key=SHARED_KEY))
            again = await body.enqueue(Item(org="org-b", key=SHARED_KEY))
            stored_a, stored_b = await parity.record(a.job_id), await parity.record(b.job_id)
        assert (a.deduped, b.deduped) == (False, False)
        assert a.job_id != b.job_id
        assert (again.job_id, again.deduped) == (b.job_id, True)
        assert (stored_a.tenant_id, stored_b.tenant_id) == ("org-a", "org-b")
        assert Item.model_validate_json(stored_b.payload).org == "org-b"

    @pytest.mark.requires("results")
    async def test_a_tenant_is_never_handed_another_tenants_result(self, parity: ParityEnv) -> None:
        """Rule: `result()` of tenant B's job is B's own output, never A's (the attack of issue 40
        item 4: one key, two tenants, no actor)."""

        @job(tenant=org_of, idempotency_key=key_of, queue=QUEUE)
        async def body(ctx: JobContext, input: Item) -> str:
            return f"the statement of {input.org}"

        async with parity.app([body]) as app:
            a = await body.enqueue(Item(org="org-a", key=SHARED_KEY))
            b = await body.enqueue(Item(org="org-b", key=SHARED_KEY))
            await within(app.run_worker(lease=LEASE, until_idle=True), what="the runs")
            assert await a.result(timeout=SHORT) == "the statement of org-a"
            assert await b.result(timeout=SHORT) == "the statement of org-b"
            assert await body.result(b.job_id, timeout=SHORT) == "the statement of org-b"

    async def test_the_stored_tenant_is_the_runs_tenant(self, parity: ParityEnv) -> None:
        """Rule: the queue row's tenant_id is the tenant the declaration derives from the input,
        whoever enqueued it; the run acts for exactly that org (`ctx.tenant`, the actor)."""
        seen: list[tuple[str | None, Actor | None]] = []

        @job(tenant=org_of, idempotency_key=key_of, queue=QUEUE)
        async def body(ctx: JobContext, input: Item) -> None:
            seen.append((ctx.tenant, current_actor()))

        async with parity.app([body]) as app:
            anonymous = await body.enqueue(Item(org="org-a", key="anonymous"))
            by_user = await run_with_context(
                Actor(user_id="u-1"), lambda: body.enqueue(Item(org="org-b", key="by-user"))
            )
            by_org = await run_with_context(
                Actor(org_id="org-c", user_id="u-2"),
                lambda: body.enqueue(Item(org="org-c", key="by-org")),
            )
            await within(app.run_worker(lease=LEASE, until_idle=True), what="the runs")
            records = [await parity.record(r.job_id) for r in (anonymous, by_user, by_org)]
        assert [r.tenant_id for r in records] == ["org-a", "org-b", "org-c"]
        assert [r.enqueued_by for r in records] == [None, "u-1", "u-2"]
        assert sorted(seen, key=lambda s: s[0] or "") == [
            ("org-a", Actor(org_id="org-a")),
            ("org-b", Actor(org_id="org-b")),
            ("org-c", Actor(org_id="org-c")),
        ]

    async def test_a_tenant_none_job_has_no_tenant_whoever_enqueues_it(
        self, parity: ParityEnv
    ) -> None:
        """Rule: a `tenant="none"` job stores no tenant and may be enqueued by an actor of any org."""

        @job(tenant="none", idempotency_key=key_of, queue=QUEUE)
        async def body(ctx: JobContext, input: Item) -> None:
            return None

        async with parity.app([body]):
            a = await run_with_context(
                Actor(org_id="org-a"), lambda: body.enqueue(Item(key=SHARED_KEY))
            )
            b = await run_with_context(
                Actor(org_id="org-b"), lambda: body.enqueue(Item(key=SHARED_KEY))
            )
            record = await parity.record(a.job_id)
        assert record.tenant_id is None
        assert (b.job_id, b.deduped) == (a.job_id, True)

    async def test_flow_control_folds_within_one_tenant_only(self, parity: ParityEnv) -> None:
        """Rule: debounce and throttle act on the job's namespace, so one key in two tenants is
        two windows: neither tenant's input replaces or swallows the other's."""

        @job(tenant=org_of, idempotency_key=key_of, queue=QUEUE)
        async def body(ctx: JobContext, input: Item) -> None:
            return None

        async with parity.app([body]):
            folded = await body.enqueue_many(
                [Item(org="org-a", key=SHARED_KEY), Item(org="org-b", key=SHARED_KEY)],
                debounce=timedelta(seconds=5),
            )
            throttled = await body.enqueue(
                Item(org="org-c", key=SHARED_KEY), throttle=timedelta(seconds=5)
            )
            records = [await parity.record(r.job_id) for r in (*folded, throttled)]
        assert len({r.job_id for r in (*folded, throttled)}) == 3
        assert [r.tenant_id for r in records] == ["org-a", "org-b", "org-c"]
        assert [Item.model_validate_json(r.payload).org for r in records] == [
            "org-a",
            "org-b",
            "org-c",
        ]


@pytest.mark.requires("introspection")
class TestAnotherOrgsJob:
    async def test_an_actor_of_another_org_is_refused_and_nothing_is_written(
        self, parity: ParityEnv
    ) -> None:
        """Rule: an actor of org A enqueuing a job whose input says org B is refused with
        XJOBS_JOB_TENANT_MISMATCH before anything is written."""

        @job(tenant=org_of, idempotency_key=key_of, queue=QUEUE)
        async def body(ctx: JobContext, input: Item) -> None:
            return None

        async with parity.app([body]):
            with pytest.raises(JobTenantMismatchError) as refused:
                await run_with_context(
                    Actor(org_id="org-a", user_id="u-1"),
                    lambda: body.enqueue(Item(org="org-b", key=SHARED_KEY)),
                )
            assert await stored_ids(parity) == set()
        assert refused.value.code == "XJOBS_JOB_TENANT_MISMATCH"

    async def test_one_foreign_input_refuses_the_whole_batch(self, parity: ParityEnv) -> None:
        """Rule: a bulk enqueue is checked whole before it is written: one input of another org
        refuses the batch, and none of its jobs is stored."""

        @job(tenant=org_of, idempotency_key=key_of, queue=QUEUE)
        async def body(ctx: JobContext, input: Item) -> None:
            return None

        async with parity.app([body]):
            with pytest.raises(JobTenantMismatchError):
                await run_with_context(
                    Actor(org_id="org-a"),
                    lambda: body.enqueue_many(
                        [
                            Item(org="org-a", key="first"),
                            Item(org="org-b", key="second"),
                            Item(org="org-a", key="third"),
                        ]
                    ),
                )
            assert await stored_ids(parity) == set()
