"""Time comes from an injected clock; the ambient actor rides `contextvars` (clock.py, context.py)."""

from __future__ import annotations

import asyncio
import time

import pytest

from xjobs.actor import (
    Actor,
    current_actor,
    current_traceparent,
    reset_actor,
    run_with_context,
    set_actor,
    set_traceparent,
    traceparent_for_enqueue,
)
from xjobs.clock import Clock, ManualClock, SystemClock, is_system_clock
from xjobs.errors import OptionInvalidError

# -- clocks ----------------------------------------------------------------------------------


def test_a_manual_clock_starts_where_it_is_told() -> None:
    assert ManualClock(1_000).now_ms() == 1_000


def test_a_manual_clock_stands_still_until_moved() -> None:
    clock = ManualClock(1_000)
    assert clock.now_ms() == clock.now_ms() == 1_000


def test_a_manual_clock_advances_and_answers_the_new_reading() -> None:
    clock = ManualClock(1_000)
    assert clock.advance(250) == 1_250
    assert clock.now_ms() == 1_250


def test_a_manual_clock_may_advance_by_zero() -> None:
    clock = ManualClock(1_000)
    assert clock.advance(0) == 1_000


def test_a_manual_clock_never_advances_backward() -> None:
    clock = ManualClock(1_000)
    with pytest.raises(OptionInvalidError, match="backward"):
        clock.advance(-1)
    assert clock.now_ms() == 1_000


def test_a_manual_clock_sets_forward() -> None:
    clock = ManualClock(1_000)
    clock.set(5_000)
    assert clock.now_ms() == 5_000


def test_a_manual_clock_may_be_set_to_now() -> None:
    clock = ManualClock(1_000)
    clock.set(1_000)
    assert clock.now_ms() == 1_000


def test_a_manual_clock_is_never_set_backward() -> None:
    clock = ManualClock(1_000)
    with pytest.raises(OptionInvalidError, match="backward"):
        clock.set(999)
    assert clock.now_ms() == 1_000


def test_a_manual_clock_reads_integer_milliseconds() -> None:
    clock = ManualClock(1_000)
    clock.advance(2)
    assert isinstance(clock.now_ms(), int)


def test_the_system_clock_reads_wall_time_in_epoch_milliseconds() -> None:
    before = time.time_ns() // 1_000_000
    reading = SystemClock().now_ms()
    after = time.time_ns() // 1_000_000
    assert isinstance(reading, int)
    assert before <= reading <= after


def test_both_clocks_satisfy_the_clock_protocol() -> None:
    assert isinstance(SystemClock(), Clock)
    assert isinstance(ManualClock(), Clock)


def test_only_the_wall_clock_lets_a_server_use_its_own_time() -> None:
    assert is_system_clock(SystemClock())
    assert not is_system_clock(ManualClock())


# -- the ambient actor -----------------------------------------------------------------------


def test_there_is_no_actor_outside_any_context() -> None:
    assert current_actor() is None


def test_an_actor_id_is_the_user_where_there_is_one_else_the_org() -> None:
    assert Actor(org_id="o1", user_id="u1").id == "u1"
    assert Actor(org_id="o1").id == "o1"
    assert Actor().id is None


@pytest.mark.asyncio
async def test_run_with_context_installs_the_actor_for_the_call() -> None:
    actor = Actor(org_id="o1")

    async def body() -> Actor | None:
        await asyncio.sleep(0)
        return current_actor()

    assert await run_with_context(actor, body) is actor


@pytest.mark.asyncio
async def test_run_with_context_restores_the_previous_actor_after() -> None:
    outer = Actor(org_id="outer")
    token = set_actor(outer)
    try:

        async def body() -> None:
            assert current_actor() == Actor(org_id="inner")

        await run_with_context(Actor(org_id="inner"), body)
        assert current_actor() is outer
    finally:
        reset_actor(token)
    assert current_actor() is None


@pytest.mark.asyncio
async def test_run_with_context_restores_the_actor_when_the_call_raises() -> None:
    async def body() -> None:
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        await run_with_context(Actor(org_id="o1"), body)
    assert current_actor() is None


@pytest.mark.asyncio
async def test_run_with_context_can_strip_the_actor() -> None:
    token = set_actor(Actor(org_id="outer"))
    try:

        async def body() -> Actor | None:
            return current_actor()

        assert await run_with_context(None, body) is None
        assert current_actor() == Actor(org_id="outer")
    finally:
        reset_actor(token)


@pytest.mark.asyncio
async def test_concurrent_runs_each_see_only_their_own_actor() -> None:
    trace: list[tuple[str, str | None]] = []

    async def run(label: str) -> None:
        for _ in range(5):
            actor = current_actor()
            trace.append((label, actor.org_id if actor else None))
            await asyncio.sleep(0)  # hand over to the other run between every reading

    await asyncio.gather(
        run_with_context(Actor(org_id="a"), lambda: run("a")),
        run_with_context(Actor(org_id="b"), lambda: run("b")),
    )
    labels = [label for label, _ in trace]
    assert labels[:4] == ["a", "b", "a", "b"]  # the runs really interleaved
    assert all(label == org for label, org in trace)
    assert current_actor() is None


@pytest.mark.asyncio
async def test_an_actor_set_inside_a_task_does_not_leak_to_its_parent() -> None:
    async def child() -> None:
        set_actor(Actor(org_id="child"))

    await asyncio.create_task(child())
    assert current_actor() is None


def test_set_actor_installs_until_reset() -> None:
    token = set_actor(Actor(org_id="o1", user_id="u1"))
    try:
        assert current_actor() == Actor(org_id="o1", user_id="u1")
    finally:
        reset_actor(token)
    assert current_actor() is None


# -- the traceparent -------------------------------------------------------------------------

TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


def test_a_traceparent_is_stamped_as_set() -> None:
    token = set_traceparent(TRACEPARENT)
    try:
        assert current_traceparent() == TRACEPARENT
        assert traceparent_for_enqueue() == TRACEPARENT
    finally:
        token.var.reset(token)
    assert current_traceparent() is None


def test_no_traceparent_is_stamped_without_a_span() -> None:
    assert traceparent_for_enqueue() is None


@pytest.mark.parametrize(
    "value",
    [
        "00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01",
        "",
        "not-a-traceparent",
        "00-0af7651916cd43dd8448eb211c80319c-01",
    ],
)
def test_no_traceparent_is_stamped_when_the_span_id_is_empty_or_malformed(value: str) -> None:
    token = set_traceparent(value)
    try:
        assert traceparent_for_enqueue() is None
    finally:
        token.var.reset(token)
