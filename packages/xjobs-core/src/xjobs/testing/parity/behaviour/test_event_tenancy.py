"""Parity: events are scoped by tenant — a send of one org never wakes, nor is found by, a wait of
another org or of the untenanted scope (issue 40, item 7; stores.py, "EventBus")."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any, TypeVar

import pytest

from xjobs import Actor, App, EventRecord, JobContext, job, run_with_context
from xjobs.actor import set_actor
from xjobs.contract.driver import ClaimedJob
from xjobs.contract.stores import EventBus
from xjobs.errors import EventInvalidError, JobTenantMismatchError
from xjobs.run.settle import parking
from xjobs.testing import rows
from xjobs.testing.parity.env import ParityEnv
from xjobs.testing.parity.jobs import QUEUE, Item, key_of, org_of

pytestmark = [pytest.mark.xjobs_parity, pytest.mark.requires("steps", "events")]

T = TypeVar("T")
EVENT = "order.paid"
HOUR_MS = 3_600_000


async def acting_as(org: str | None, fn: Callable[[], Awaitable[T]]) -> T:
    """`fn()` awaited with an actor of `org` (an actor of no org for `None`)."""
    return await run_with_context(Actor(org_id=org), fn)


def waiter(seen: list[object], *, tenant: Any = org_of) -> Any:
    """A job of QUEUE that waits for EVENT of order o-7 and records the payload it got."""

    @job(tenant=tenant, idempotency_key=key_of, queue=QUEUE, name="event_waiter")
    async def event_waiter(ctx: JobContext, input: Item) -> None:
        seen.append(
            await ctx.step.wait_for_event(
                "paid", EVENT, match={"order": "o-7"}, timeout=timedelta(days=1)
            )
        )

    return event_waiter


async def send(app: App, org: str | None, payload: dict[str, Any]) -> EventRecord:
    """A send with the ambient actor of `org` and no explicit tenant (the default scope)."""
    return await acting_as(org, lambda: app.send_event(EVENT, payload))


class TestEventTenancy:
    async def test_another_orgs_event_never_wakes_a_waiter_and_its_own_does(
        self, parity: ParityEnv
    ) -> None:
        """Rule: a wait of org A is woken only by an event sent in org A: a sender of org B with a
        matching payload (and an untenanted sender) leaves it waiting; A's own event wakes it with
        A's payload."""
        seen: list[object] = []
        flow = waiter(seen)
        async with parity.app(jobs=[flow]) as app:
            result = await flow.enqueue(Item(org="org-a", key="o-7"))
            await app.run_worker(until_idle=True)
            await send(app, "org-b", {"order": "o-7", "from": "org-b"})
            await app.send_event(EVENT, {"order": "o-7", "from": "nobody"}, tenant=None)
            foreign = await app.run_worker(until_idle=True)
            parked = await app.get_job(result.job_id)
            await send(app, "org-a", {"order": "o-7", "from": "org-a"})
            own = await app.run_worker(until_idle=True)
            done = await app.get_job(result.job_id)
        assert (foreign.claimed, parked.state) == (0, "waiting")
        assert (own.completed, done.state) == (1, "completed")
        assert seen == [{"order": "o-7", "from": "org-a"}]

    async def test_an_untenanted_waiter_is_woken_only_by_an_untenanted_event(
        self, parity: ParityEnv
    ) -> None:
        """Rule: a `tenant="none"` job waits in the untenanted scope: an org's event leaves it
        waiting, an event sent with no actor org wakes it."""
        seen: list[object] = []
        flow = waiter(seen, tenant="none")
        async with parity.app(jobs=[flow]) as app:
            result = await flow.enqueue(Item())
            await app.run_worker(until_idle=True)
            await send(app, "org-a", {"order": "o-7", "from": "org-a"})
            foreign = await app.run_worker(until_idle=True)
            await send(app, None, {"order": "o-7", "from": "nobody"})
            await app.run_worker(until_idle=True)
            done = await app.get_job(result.job_id)
        assert foreign.claimed == 0
        assert (done.state, seen) == ("completed", [{"order": "o-7", "from": "nobody"}])

    async def test_a_body_sends_in_its_runs_tenant(self, parity: ParityEnv) -> None:
        """Rule: inside a run, `send_event` defaults to the run's tenant (`ctx.tenant`)."""
        seen: list[object] = []
        flow = waiter(seen)

        @job(tenant=org_of, idempotency_key=key_of, queue=QUEUE, name="event_sender")
        async def event_sender(ctx: JobContext, input: Item) -> str | None:
            sent = await app.send_event(EVENT, {"order": "o-7", "from": ctx.tenant})
            return sent.tenant

        async with parity.app(jobs=[flow, event_sender]) as app:
            wait_a = await flow.enqueue(Item(org="org-a", key="w-a"))
            wait_b = await flow.enqueue(Item(org="org-b", key="w-b"))
            await app.run_worker(until_idle=True)
            await event_sender.enqueue(Item(org="org-b", key="s-b"))
            await app.run_worker(until_idle=True)
            a, b = await app.get_job(wait_a.job_id), await app.get_job(wait_b.job_id)
        assert (a.state, b.state) == ("waiting", "completed")
        assert seen == [{"order": "o-7", "from": "org-b"}]

    async def test_an_actor_may_not_send_into_another_org(self, parity: ParityEnv) -> None:
        """Rule: an explicit tenant other than the actor's org is `XJOBS_JOB_TENANT_MISMATCH`,
        refused before anything is stored; a process with no actor org may name any tenant."""
        async with parity.app() as app:
            with pytest.raises(JobTenantMismatchError):
                await acting_as("org-a", lambda: app.send_event(EVENT, {}, tenant="org-b"))
            with pytest.raises(JobTenantMismatchError):
                await acting_as("org-a", lambda: app.send_event(EVENT, {}, tenant=None))
            own = await acting_as("org-a", lambda: app.send_event(EVENT, {}, tenant="org-a"))
            admin = await app.send_event(EVENT, {"admin": True}, tenant="org-b")
            bus = _bus(parity)
            found_b = await bus.find(EVENT, "{}", 0, tenant="org-b")
        assert (own.tenant, admin.tenant) == ("org-a", "org-b")
        assert found_b is not None
        assert found_b.id == admin.id

    @pytest.mark.parametrize("tenant", ["", 7, "a\x00b", "x" * 201])
    async def test_a_bad_tenant_is_refused(self, parity: ParityEnv, tenant: Any) -> None:
        """Rule: an event's tenant is None or an org id of 1-200 characters without NUL
        (`XJOBS_EVENT_INVALID`); the empty string is no alias of the untenanted scope."""
        async with parity.app() as app:
            with pytest.raises(EventInvalidError):
                await app.send_event(EVENT, {}, tenant=tenant)


def _bus(parity: ParityEnv) -> EventBus:
    events = parity.backend.events
    assert events is not None
    return events


async def _parked(parity: ParityEnv, tenant: str | None) -> ClaimedJob:
    """A running job parked waiting (since 0) for EVENT in `tenant`, due in an hour."""
    await parity.enqueue()
    claimed = await parity.claim_one()
    wait = rows.event_wait(claimed, event=EVENT, tenant=tenant)
    landed = await _bus(parity).park(claimed.claim, wait, parking(parity.clock.now_ms() + HOUR_MS))
    assert landed
    return claimed


class TestBusTenancy:
    async def test_find_answers_only_the_tenants_own_events(self, parity: ParityEnv) -> None:
        """Rule: `find` in one tenant never answers an event of another tenant or of the
        untenanted scope."""
        bus = _bus(parity)
        await bus.send(EVENT, '{"order": "o-1"}', tenant="org-b")
        await bus.send(EVENT, '{"order": "o-1"}')
        assert await bus.find(EVENT, '{"order": "o-1"}', 0, tenant="org-a") is None
        own = await bus.send(EVENT, '{"order": "o-1"}', tenant="org-a")
        found = await bus.find(EVENT, '{"order": "o-1"}', 0, tenant="org-a")
        assert found is not None
        assert (found.id, found.tenant) == (own.id, "org-a")

    async def test_a_park_is_not_made_due_by_another_tenants_stored_event(
        self, parity: ParityEnv
    ) -> None:
        """Rule: the park's look for an already-stored match reads the wait's tenant only."""
        await _bus(parity).send(EVENT, "{}", tenant="org-b")
        claimed = await _parked(parity, "org-a")
        record = await parity.record(claimed.id)
        assert record.run_at_ms == parity.clock.now_ms() + HOUR_MS

    async def test_a_park_is_made_due_by_its_own_tenants_stored_event(
        self, parity: ParityEnv
    ) -> None:
        """Rule: within a tenant, an event stored before the park (after the wait began) still
        makes the parked job due now."""
        await _bus(parity).send(EVENT, "{}", tenant="org-a")
        claimed = await _parked(parity, "org-a")
        assert (await parity.record(claimed.id)).run_at_ms == parity.clock.now_ms()

    async def test_a_send_wakes_only_the_waits_of_its_tenant(self, parity: ParityEnv) -> None:
        """Rule: a send wakes the matching waits of its own tenant, not another's, not the
        untenanted scope's."""
        a, b, none = [await _parked(parity, t) for t in ("org-a", "org-b", None)]
        now = parity.clock.advance(5)
        await _bus(parity).send(EVENT, "{}", tenant="org-a")
        due = [(await parity.record(j.id)).run_at_ms == now for j in (a, b, none)]
        assert due == [True, False, False]


class TestEventTenancyOfTheRun:
    async def test_a_body_that_installs_another_actor_still_waits_in_its_runs_tenant(
        self, parity: ParityEnv
    ) -> None:
        """Rule: a wait is scoped to the run's tenant (`ctx.tenant`), not to whatever actor the
        body installs before it: an event of the installed actor's org leaves the run waiting, one
        of the run's own org wakes it."""
        seen: list[object] = []

        @job(tenant=org_of, idempotency_key=key_of, queue=QUEUE, name="event_waiter")
        async def event_waiter(ctx: JobContext, input: Item) -> None:
            set_actor(Actor(org_id="org-b"))
            seen.append(
                await ctx.step.wait_for_event(
                    "paid", EVENT, match={"order": "o-7"}, timeout=timedelta(days=1)
                )
            )

        async with parity.app(jobs=[event_waiter]) as app:
            result = await event_waiter.enqueue(Item(org="org-a", key="o-7"))
            await app.run_worker(until_idle=True)
            await send(app, "org-b", {"order": "o-7", "from": "org-b"})
            foreign = await app.run_worker(until_idle=True)
            await send(app, "org-a", {"order": "o-7", "from": "org-a"})
            own = await app.run_worker(until_idle=True)
            done = await app.get_job(result.job_id)
        assert (foreign.completed, own.completed, done.state) == (0, 1, "completed")
        assert seen == [{"order": "o-7", "from": "org-a"}]
