"""Redis Sentinel: `redis+sentinel://` URLs, `wait_replicas`, and a failover that loses nothing acknowledged.

The groups are real: a primary, its replica and three sentinels started from redis-server on
loopback. The failover scenarios stall the replica (SIGSTOP) and cut its link (CLIENT KILL TYPE
replica on the primary, so nothing waits in the socket for it) so that it misses writes the
primary acknowledged, then kill the primary: without `wait_replicas` the promoted replica has
lost them and the check finds each one missing; with `wait_replicas=1` no such write was
acknowledged.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Iterator

import pytest
from pydantic import BaseModel
from redis.asyncio import Redis

import xjobs
from xjobs.errors import BackendUnavailableError, JobNotFoundError
from xjobs_redis.backend import open_backend
from xjobs_redis.errors import RedisUrlInvalidError
from xjobs_redis.replication import Replication, choose_replication
from xjobs_redis.sentinel import DEFAULT_SENTINEL_PORT, parse_sentinel_url
from xjobs_redis.sentinel_servers import SentinelGroup, sentinel_group
from xjobs_redis.servers import ServerUnavailable, unavailable

QUEUE = "sentinel"
STALLED = 20  # enqueues acknowledged while the replica is stalled


class Parcel(BaseModel):
    key: str


ran: list[str] = []


@xjobs.job(tenant="none", queue=QUEUE, idempotency_key=lambda p: p.key)
async def deliver(ctx: xjobs.JobContext, parcel: Parcel) -> None:
    ran.append(parcel.key)


def app_on(url: str) -> xjobs.App:
    return xjobs.App(url, jobs=[deliver], retention=None)


@pytest.fixture
def group() -> Iterator[SentinelGroup]:
    try:
        started = sentinel_group()
    except ServerUnavailable as exc:
        unavailable(str(exc))
    try:
        yield started
    finally:
        started.remove()


class TestUrl:
    def test_sentinels_service_database_and_logins_are_read(self) -> None:
        target = parse_sentinel_url(
            "rediss+sentinel://app:s%40cret@h1:26380,h2,[::1]:26381/orders/3"
            "?sentinel_password=watch"
        )
        assert target.sentinels == (("h1", 26380), ("h2", DEFAULT_SENTINEL_PORT), ("::1", 26381))
        assert (target.service, target.db, target.tls) == ("orders", 3, True)
        assert (target.username, target.password) == ("app", "s@cret")
        assert target.sentinel_login == {"password": "watch"}
        assert "s@cret" not in repr(target)
        assert "watch" not in repr(target)

    @pytest.mark.parametrize(
        ("url", "says"),
        [
            ("redis+sentinel:///orders", "at least one sentinel"),
            ("redis+sentinel://h1:26379", "/service_name"),
            ("redis+sentinel://h1:26379/orders/zero", "database is a number"),
            ("redis+sentinel://h1:26379/a/1/extra", "/service_name"),
            ("redis+sentinel://h1:99999/orders", "no valid port"),
            ("redis+sentinel://h1:port/orders", "no valid port"),
            ("redis+sentinel://h1/orders?socket_timeout=1", r"unknown redis\+sentinel:// option"),
        ],
    )
    def test_a_bad_url_is_refused_naming_what_is_wrong(self, url: str, says: str) -> None:
        with pytest.raises(RedisUrlInvalidError, match=says) as caught:
            parse_sentinel_url(url)
        assert caught.value.code == "XJOBS_REDIS_URL_INVALID"

    @pytest.mark.asyncio
    async def test_a_bad_url_is_refused_at_open_before_any_dial(self) -> None:
        with pytest.raises(RedisUrlInvalidError):
            await open_backend("redis+sentinel://127.0.0.1:1")


class TestWaitReplicasOption:
    def test_url_and_keyword_are_read_and_must_agree(self) -> None:
        assert choose_replication({}, None, None, cluster=False) is None
        assert choose_replication({"wait_replicas": "0"}, None, None, cluster=False) is None
        assert choose_replication({"wait_replicas": "2"}, None, None, cluster=False) == (
            Replication(2, 1000)
        )
        assert choose_replication({}, 1, 250, cluster=False) == Replication(1, 250)
        with pytest.raises(RedisUrlInvalidError, match="pass one"):
            choose_replication({"wait_replicas": "2"}, 1, None, cluster=False)

    @pytest.mark.parametrize(
        ("query", "replicas", "timeout_ms", "says"),
        [
            ({"wait_replicas": "-1"}, None, None, "whole number"),
            ({"wait_replicas": "one"}, None, None, "whole number"),
            ({}, -2, None, ">= 0"),
            ({"wait_timeout_ms": "0"}, 1, None, "positive"),
            ({}, 1, 0, "positive"),
        ],
    )
    def test_a_bad_value_is_refused(
        self, query: dict[str, str], replicas: int | None, timeout_ms: int | None, says: str
    ) -> None:
        with pytest.raises(RedisUrlInvalidError, match=says):
            choose_replication(query, replicas, timeout_ms, cluster=False)

    def test_a_cluster_is_refused_it_has_no_one_primary_to_wait_on(self) -> None:
        with pytest.raises(RedisUrlInvalidError, match="not a Redis Cluster"):
            choose_replication({"wait_replicas": "1"}, None, None, cluster=True)


class TestThroughTheSentinels:
    @pytest.mark.asyncio
    async def test_an_app_runs_jobs_on_the_primary_the_sentinels_name(
        self, group: SentinelGroup
    ) -> None:
        ran.clear()
        async with app_on(group.url()) as app:
            handle = await deliver.enqueue(Parcel(key="first"))
            await app.run_worker(queues=[QUEUE], until_idle=True)
            assert (await app.get_job(handle.job_id)).state == "completed"
        assert ran == ["first"]

    @pytest.mark.asyncio
    async def test_with_wait_replicas_an_answered_enqueue_is_on_the_replica(
        self, group: SentinelGroup
    ) -> None:
        replica = next(s for s in group.servers if s is not group.primary())
        async with (
            app_on(group.url("wait_replicas=1")) as app,
            Redis.from_url(f"redis://127.0.0.1:{replica.port}/0") as reader,
        ):
            handle = await deliver.enqueue(Parcel(key="replicated"))
            # no wait, no retry: the answer itself means the replica has the job's row
            keys = [key async for key in reader.scan_iter(match=f"*{handle.job_id}*")]
            assert keys, "the enqueue answered before its job reached the replica"
            assert (await app.get_job(handle.job_id)).state == "ready"

    @pytest.mark.asyncio
    async def test_with_wait_replicas_a_stalled_replica_makes_the_write_unavailable(
        self, group: SentinelGroup
    ) -> None:
        replica = next(s for s in group.servers if s is not group.primary())
        assert replica.process is not None
        async with app_on(group.url("wait_replicas=1&wait_timeout_ms=200")) as app:
            replica.process.send_signal(signal.SIGSTOP)
            try:
                with pytest.raises(BackendUnavailableError, match="1 replicas") as caught:
                    await deliver.enqueue(Parcel(key="unreplicated"))
                assert caught.value.code == "XJOBS_BACKEND_UNAVAILABLE"
            finally:
                replica.process.send_signal(signal.SIGCONT)
            # the same enqueue again, once the replica is back: retry-safe, one job
            first = await deliver.enqueue(Parcel(key="unreplicated"))
            again = await deliver.enqueue(Parcel(key="unreplicated"))
            assert first.job_id == again.job_id
            assert (await app.get_job(first.job_id)).state == "ready"


class TestFailover:
    @pytest.mark.asyncio
    @pytest.mark.parametrize("wait", [False, True], ids=["async-replication", "wait_replicas=1"])
    async def test_what_was_acknowledged_survives_the_promotion_only_with_wait(
        self, group: SentinelGroup, wait: bool
    ) -> None:
        """The replica misses every write while stalled; the primary dies; the replica is
        promoted. Acknowledged without WAIT: lost, and the check finds each one missing. With
        WAIT: refused as unavailable instead, so nothing acknowledged is lost; the retries land
        on the new primary once it has a replica again."""
        ran.clear()
        query = "wait_replicas=1&wait_timeout_ms=200" if wait else ""
        replica = next(s for s in group.servers if s is not group.primary())
        assert replica.process is not None
        acknowledged: dict[str, str] = {}
        refused: list[str] = []
        async with app_on(group.url(query)) as app:
            before = await deliver.enqueue(Parcel(key="before"))  # replicated: the link is up
            acknowledged["before"] = before.job_id
            await asyncio.sleep(0.2)
            replica.process.send_signal(signal.SIGSTOP)
            try:
                await cut_replica_link(group)
                for n in range(STALLED):
                    key = f"stalled-{n}"
                    try:
                        acknowledged[key] = (await deliver.enqueue(Parcel(key=key))).job_id
                    except BackendUnavailableError:
                        refused.append(key)
                    if wait and n == 2:
                        break  # each refusal waits its timeout: three show the rule
                old = group.kill_primary()
            finally:
                replica.process.send_signal(signal.SIGCONT)
            promoted = await asyncio.to_thread(group.await_failover, old)
            assert promoted is replica
            if wait:
                # the new primary has no replica to acknowledge a write until the old primary
                # comes back (the sentinels make it a replica of the new one): until then every
                # write is refused as unavailable, never acknowledged and lost
                await asyncio.to_thread(old.start)
            for key in refused:  # the caller's retry of what was refused, on the new primary
                acknowledged[key] = await retry_enqueue(key)
            lost = [key for key, job_id in acknowledged.items() if not await exists(app, job_id)]
            await app.run_worker(queues=[QUEUE], until_idle=True)
        print(
            f"\nwait={wait}: acknowledged {len(acknowledged)}, refused {len(refused)}, lost {lost}"
        )
        if wait:
            assert lost == []
            assert len(refused) == 3
            assert sorted(ran) == sorted(acknowledged)
        else:
            # the promoted replica never saw them: the data-loss check names each one
            assert refused == []
            assert sorted(lost) == sorted(f"stalled-{n}" for n in range(STALLED))
            assert ran == ["before"]


async def cut_replica_link(group: SentinelGroup) -> None:
    """Close the primary's connection to its (stalled) replica: what it writes next reaches no one."""
    async with Redis.from_url(group.primary_url()) as primary:
        assert await primary.client_kill_filter(_type="replica") == 1


async def retry_enqueue(key: str, attempts: int = 300) -> str:
    for _ in range(attempts):
        try:
            return (await deliver.enqueue(Parcel(key=key))).job_id
        except BackendUnavailableError:
            await asyncio.sleep(0.1)
    raise AssertionError(f"the enqueue of {key} was never accepted by the new primary")


async def exists(app: xjobs.App, job_id: str) -> bool:
    try:
        await app.get_job(job_id)
    except JobNotFoundError:
        return False
    return True
