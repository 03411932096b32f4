"""Every refusal a restart or a failover causes is `XJOBS_BACKEND_UNAVAILABLE` (retry-safe), never
`XJOBS_BACKEND_ERROR`: an enqueue cut mid-call by a fast or an immediate shutdown, by the crash of
another backend, refused while the server shuts down, or by a server out of connection slots.

A server of this module's own (the shared one is not stopped or crashed under other tests); each
enqueue is held mid-call by a lock another session holds on the jobs table when the fault strikes.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator

import asyncpg
import pytest
import pytest_asyncio
from pydantic import BaseModel

import xjobs
from xjobs.errors import BackendUnavailableError, XJobsError
from xjobs_pg.servers import Cluster, ServerUnavailable, new_cluster, unavailable

SCHEMA = "xjobs_unavailable"
SLOTS = 12  # max_connections, none reserved: the slots test fills them


class Parcel(BaseModel):
    key: str


@xjobs.job(tenant="none", idempotency_key=lambda p: p.key)
async def deliver(ctx: xjobs.JobContext, p: Parcel) -> None:
    """Never run: these tests only enqueue."""


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    """A server of this module's own, stopped and crashed by its tests."""
    try:
        started = new_cluster([f"max_connections={SLOTS}", "superuser_reserved_connections=0"])
        started.start()
    except (ServerUnavailable, FileNotFoundError) as exc:
        unavailable(f"no Postgres of this module's own: {exc}")
    try:
        yield started
    finally:
        started.remove()


@pytest_asyncio.fixture
async def url(cluster: Cluster) -> AsyncIterator[str]:
    """The server's URL with the schema, the server up (a test left it down or restarting)."""
    await asyncio.to_thread(_up, cluster)
    yield f"{cluster.url}?xjobs_schema={SCHEMA}"
    await asyncio.to_thread(_up, cluster)


def _up(cluster: Cluster) -> None:
    with contextlib.suppress(ServerUnavailable):  # not stopped: crashed, or up already
        cluster.start()
    asyncio.run(_answers(cluster.url))


async def _answers(url: str) -> None:
    for _ in range(300):  # crash recovery restarts the server by itself
        try:
            conn = await asyncpg.connect(url, timeout=5)
        except (OSError, asyncpg.PostgresError):
            await asyncio.sleep(0.1)
            continue
        await conn.close()
        return
    raise ServerUnavailable("the module's server did not come back")


async def held_then_struck(
    url: str, strike: Callable[[asyncpg.Connection], Awaitable[None]]
) -> BaseException:
    """Enqueue while another session locks the jobs table, strike, and answer what the enqueue raised."""
    async with xjobs.App(url, jobs=[deliver]) as app:
        locker = await asyncpg.connect(url.split("?")[0])
        try:
            tx = locker.transaction()
            await tx.start()
            await locker.execute(f"lock table {SCHEMA}.jobs in access exclusive mode")
            enqueue = asyncio.ensure_future(app.enqueue(deliver, Parcel(key="held")))
            await _waiting_on_the_lock(locker)
            await strike(locker)
            with pytest.raises(XJobsError) as raised:
                await asyncio.wait_for(enqueue, 30)
        finally:
            locker.terminate()
    return raised.value


async def _waiting_on_the_lock(locker: asyncpg.Connection) -> None:
    for _ in range(300):
        waiting = await locker.fetchval(
            "select count(*) from pg_stat_activity where wait_event_type = 'Lock'"
        )
        if waiting:
            return
        await asyncio.sleep(0.05)
    raise AssertionError("the enqueue never waited on the lock")


def stopping(cluster: Cluster, mode: str) -> Callable[[asyncpg.Connection], Awaitable[None]]:
    async def strike(_locker: asyncpg.Connection) -> None:
        await asyncio.to_thread(cluster.run, "pg_ctl", "stop", "-w", "-m", mode)

    return strike


@pytest.mark.asyncio
@pytest.mark.parametrize("mode", ["fast", "immediate"])
async def test_an_enqueue_cut_by_a_shutdown_is_unavailable(
    cluster: Cluster, url: str, mode: str
) -> None:
    raised = await held_then_struck(url, stopping(cluster, mode))
    assert isinstance(raised, BackendUnavailableError), repr(raised)


@pytest.mark.asyncio
async def test_an_enqueue_cut_by_the_crash_of_another_backend_is_unavailable(url: str) -> None:
    async def crash_the_locker(locker: asyncpg.Connection) -> None:
        os.kill(locker.get_server_pid(), signal.SIGKILL)  # the postmaster resets every session

    raised = await held_then_struck(url, crash_the_locker)
    assert isinstance(raised, BackendUnavailableError), repr(raised)


@pytest.mark.asyncio
async def test_an_app_opened_while_the_server_shuts_down_is_unavailable(
    cluster: Cluster, url: str
) -> None:
    stay = await asyncpg.connect(cluster.url)  # a smart shutdown waits for it to leave
    try:
        await asyncio.to_thread(cluster.run, "pg_ctl", "stop", "-W", "-m", "smart")
        with pytest.raises(BackendUnavailableError, match="shutting down"):
            async with xjobs.App(url, jobs=[deliver]):
                pass
    finally:
        await stay.close()


@pytest.mark.asyncio
async def test_an_app_opened_when_every_connection_slot_is_taken_is_unavailable(url: str) -> None:
    async with xjobs.App(url, jobs=[deliver]):
        pass  # the schema is in place: the next open fails at its first connection
    base = url.split("?")[0]
    taken: list[asyncpg.Connection] = []
    try:
        with contextlib.suppress(asyncpg.TooManyConnectionsError):
            while len(taken) < SLOTS:
                taken.append(await asyncpg.connect(base))
        with pytest.raises(BackendUnavailableError, match="TooManyConnections"):
            async with xjobs.App(url, jobs=[deliver]):
                pass
    finally:
        for conn in taken:
            await conn.close()
