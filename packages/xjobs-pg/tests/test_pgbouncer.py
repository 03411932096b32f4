"""Postgres behind a real pgbouncer (Debian's package), in transaction and in session mode.

Through transaction pooling: a proxy the URL does not declare is refused at open; the wake is never
proven (a probe cannot cross), so a declared backend holds no `LISTEN` session and its worker
polls; asyncpg's statement cache is off unless the URL turns it on, and a cached statement is
shown to break there; the advisory leader refuses and the lease leader elects one.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import asyncpg
import pytest
from pydantic import BaseModel

import xjobs
from xjobs.clock import SystemClock
from xjobs.contract.backend import Backend, WakeSource
from xjobs.errors import BackendError, LeaderUnsafeError, OptionInvalidError
from xjobs_pg import postgres_advisory_leader, wake
from xjobs_pg.backend import asyncpg_dsn, open_backend
from xjobs_pg.executor import Executor
from xjobs_pg.pooler import PoolMode, pgbouncer_url
from xjobs_pg.pooling import Pooling
from xjobs_pg.schema import quote_schema, wake_channel
from xjobs_pg.servers import ServerUnavailable, direct_postgres_url, unavailable
from xjobs_pg.sql import Statements
from xjobs_pg.testing import DROP_SCHEMA, session
from xjobs_pg.wake import WakeListener

WAIT_S = 20.0
LISTENING = """
select count(*) from pg_stat_activity
where query ilike 'listen%' and position($1 in query) > 0
"""
ADVISORY_LOCKS = "select count(*) from pg_locks where locktype = 'advisory'"


def bouncer(mode: PoolMode = "transaction") -> str:
    """The pooled URL (declaring `mode`) of a pgbouncer in front of the test server."""
    try:
        return pgbouncer_url(direct_postgres_url(), mode)
    except ServerUnavailable as exc:
        unavailable(f"no pgbouncer in front of a test Postgres: {exc}")


def undeclared(url: str) -> str:
    """`url` without its `xjobs_pooler` declaration."""
    return url.split("?", 1)[0]


def with_option(url: str, option: str) -> str:
    return f"{url}{'&' if '?' in url else '?'}{option}"


@asynccontextmanager
async def fresh_schema() -> AsyncIterator[str]:
    """A schema name of this test's own, dropped (straight on the server) afterwards."""
    name = f"xjobs_t_{secrets.token_hex(6)}"
    try:
        yield name
    finally:
        async with session() as conn:
            await conn.execute(DROP_SCHEMA.format(schema=quote_schema(name)))


@asynccontextmanager
async def opened(url: str, *, min_size: int = 1, max_size: int = 20) -> AsyncIterator[Backend]:
    backend = await open_backend(url, min_size=min_size, max_size=max_size)
    try:
        yield backend
    finally:
        await backend.close()


# -- the URL's declaration ---------------------------------------------------------------------


def test_a_declared_transaction_pooler_turns_the_statement_cache_off_unless_told() -> None:
    assert Pooling.from_options({}) == Pooling("none", True)
    assert Pooling.from_options({"pooler": "session"}) == Pooling("session", True)
    transaction = Pooling.from_options({"pooler": "transaction"})
    assert transaction == Pooling("transaction", False)
    assert transaction.connect_options({})["statement_cache_size"] == 0
    assert not transaction.listens
    assert Pooling.from_options({"pooler": "transaction", "prepared_statements": "on"}) == (
        Pooling("transaction", True)
    )
    assert "statement_cache_size" not in Pooling("transaction", True).connect_options({})
    assert Pooling.from_options({"prepared_statements": "off"}).connect_options({}) == {
        "statement_cache_size": 0
    }


def test_a_session_of_its_own_has_the_jit_compiler_off_and_a_pooled_one_is_left_alone() -> None:
    direct = Pooling.from_options({}).pool_options({"server_settings": {"work_mem": "8MB"}})
    assert direct["server_settings"] == {
        "work_mem": "8MB",
        "jit": "off",
        "plan_cache_mode": "force_generic_plan",
    }
    custom = Pooling.from_options({}).pool_options({"server_settings": {"plan_cache_mode": "auto"}})
    assert custom["server_settings"]["plan_cache_mode"] == "auto"  # the caller's own wins
    assert "server_settings" not in Pooling("transaction", False).pool_options({})
    assert "server_settings" not in Pooling("session", True).pool_options({})
    assert "server_settings" not in Pooling().connect_options({})  # a leader's or listener's


@pytest.mark.parametrize(
    "options", [{"pooler": "pgbouncer"}, {"pooler": ""}, {"prepared_statements": "yes"}]
)
def test_a_bad_pooler_option_is_refused(options: dict[str, str]) -> None:
    with pytest.raises(OptionInvalidError) as refused:
        Pooling.from_options(options)
    assert refused.value.code == "XJOBS_OPTION_INVALID"


@pytest.mark.asyncio
async def test_an_undeclared_proxy_is_refused_at_open_before_anything_is_written() -> None:
    url = undeclared(bouncer())
    async with fresh_schema() as schema:
        with pytest.raises(OptionInvalidError) as refused:
            await open_backend(with_option(url, f"xjobs_schema={schema}"))
        assert "xjobs_pooler=transaction" in refused.value.message
        async with session() as conn:
            exists = await conn.fetchval("select to_regnamespace($1) is not null", schema)
        assert exists is False


@pytest.mark.asyncio
async def test_straight_to_the_server_no_proxy_is_found() -> None:
    async with fresh_schema() as schema, opened(f"{direct_postgres_url()}?xjobs_schema={schema}"):
        pass  # opened: the check found the session's pid where the connection said it was


# -- the wake ----------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_a_listen_through_transaction_pooling_is_never_proven_and_straight_it_is(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # the probe's wait is shortened: an unproven session is what this test expects to see
    monkeypatch.setattr(wake, "PROBE_TIMEOUT_S", 1.0)
    heard = Unproven()
    logging.getLogger("xjobs_pg.wake").addHandler(heard)
    async with fresh_schema() as schema:
        channel = wake_channel(schema)
        # the probe is sent straight to the server, as any other session could send it
        pool = await asyncpg.create_pool(
            asyncpg_dsn(direct_postgres_url())[0], min_size=1, max_size=2
        )
        executor = Executor(pool, Statements(quote_schema(schema)), SystemClock())
        try:
            for url, proven in ((undeclared(bouncer()), False), (direct_postgres_url(), True)):
                heard.given_up.clear()
                source = WakeSource()
                listener = WakeListener(asyncpg_dsn(url)[0], channel, source, executor)
                try:
                    if proven:
                        assert await listener.until_live(WAIT_S) is True
                        assert source.live
                    else:
                        listener.start()
                        async with asyncio.timeout(WAIT_S):
                            await heard.given_up.wait()
                        assert await listener.until_live(0) is False
                        assert not source.live
                finally:
                    await listener.close()
        finally:
            await executor.close()
            logging.getLogger("xjobs_pg.wake").removeHandler(heard)


class Unproven(logging.Handler):
    """Sets `given_up` when the listener logs that its probe never arrived."""

    def __init__(self) -> None:
        super().__init__()
        self.given_up = asyncio.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if record.getMessage() == "jobs.wake.unproven":
            self.given_up.set()


class Parcel(BaseModel):
    n: int


@pytest.mark.asyncio
async def test_a_declared_pooler_holds_no_listen_session_and_its_worker_polls() -> None:
    ran: list[int] = []

    @xjobs.job(tenant="none", idempotency_key=lambda p: str(p.n), queue="bounced")
    async def deliver(ctx: xjobs.JobContext, parcel: Parcel) -> int:
        ran.append(parcel.n)
        return parcel.n * 2

    async with fresh_schema() as schema:
        url = with_option(bouncer(), f"xjobs_schema={schema}")
        async with xjobs.App(url, jobs=[deliver]) as app:
            worker = app.worker(concurrency=4)
            await worker.start()
            try:
                handles = await app.enqueue_many(deliver, [Parcel(n=n) for n in range(20)])
                # the result waits poll too: no LISTEN session carries the settle
                results = [await deliver.result(h.job_id) for h in handles]
                assert app.backend.wake is not None
                assert not app.backend.wake.live
            finally:
                await worker.stop()
        async with session() as conn:
            listening = await conn.fetchval(LISTENING, wake_channel(schema))
    assert sorted(ran) == list(range(20))
    assert results == [n * 2 for n in range(20)]
    assert listening == 0


# -- prepared statements -----------------------------------------------------------------------


async def get_twice_across_a_busy_session(url: str) -> None:
    """Run one statement, let another client take that server session in a transaction, then
    run the statement again: a statement prepared on the first session is not on the next."""
    async with opened(url, min_size=1, max_size=1) as backend:
        missing = "00000000-0000-7000-8000-000000000000"
        assert await backend.jobs.get(missing) is None
        other = await asyncpg.connect(asyncpg_dsn(url)[0], statement_cache_size=0)
        try:
            async with other.transaction():
                await other.fetchval("select pg_backend_pid()")
                assert await backend.jobs.get(missing) is None
        finally:
            await other.close()


@pytest.mark.asyncio
async def test_statements_are_not_prepared_through_transaction_pooling_unless_the_url_says() -> (
    None
):
    async with fresh_schema() as schema:
        url = with_option(bouncer(), f"xjobs_schema={schema}")
        await get_twice_across_a_busy_session(url)  # the cache off: each statement parsed anew
        with pytest.raises(BackendError) as broke:
            await get_twice_across_a_busy_session(with_option(url, "xjobs_prepared_statements=on"))
    assert "does not exist" in broke.value.message


# -- leaders -----------------------------------------------------------------------------------


def test_the_advisory_leader_refuses_a_url_declaring_transaction_pooling() -> None:
    with pytest.raises(LeaderUnsafeError) as refused:
        postgres_advisory_leader(bouncer())
    assert refused.value.code == "XJOBS_LEADER_UNSAFE"


@pytest.mark.asyncio
async def test_the_advisory_leader_finds_an_undeclared_proxy_and_never_leads() -> None:
    key = f"xjobs_t_{secrets.token_hex(6)}"
    leader = postgres_advisory_leader(undeclared(bouncer()), key=key)
    async with session() as conn:
        before = await conn.fetchval(ADVISORY_LOCKS)
        for _ in range(2):  # each acquire dials anew and refuses again
            with pytest.raises(LeaderUnsafeError):
                await leader.acquire("alpha", 1_000)
        assert await conn.fetchval(ADVISORY_LOCKS) == before
    await leader.release("alpha")


@pytest.mark.asyncio
async def test_through_a_declared_session_pooler_the_advisory_leader_elects_one() -> None:
    key = f"xjobs_t_{secrets.token_hex(6)}"
    a, b = (postgres_advisory_leader(bouncer("session"), key=key) for _ in range(2))
    try:
        assert await a.acquire("alpha", 1_000) is True
        assert await b.acquire("beta", 1_000) is False
        await a.release("alpha")
        assert await b.acquire("beta", 1_000) is True
    finally:
        await a.release("alpha")
        await b.release("beta")


@pytest.mark.asyncio
async def test_through_transaction_pooling_the_lease_leader_elects_one() -> None:
    async with fresh_schema() as schema:
        url = with_option(bouncer(), f"xjobs_schema={schema}")
        async with opened(url) as one, opened(url) as two:
            assert one.leader is not None
            assert two.leader is not None
            assert await one.leader.acquire("alpha", 60_000) is True
            assert await two.leader.acquire("beta", 60_000) is False
            assert await one.leader.acquire("alpha", 60_000) is True  # renewed
            await one.leader.release("alpha")
            assert await two.leader.acquire("beta", 60_000) is True
            assert await one.leader.acquire("alpha", 60_000) is False
