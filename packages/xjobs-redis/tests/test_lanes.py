"""Script calls on kept connections: reused up to the keep, a server's error reply keeps its
connection, a lost connection falls back to the pool with the call landing once, a cancelled
call's connection is dropped (the next reply is the next call's own), close leaves none kept;
the packed call is byte for byte redis-py's."""

from __future__ import annotations

import asyncio
import secrets
import socket
from collections.abc import AsyncIterator
from typing import Any, cast

import pytest
import pytest_asyncio
from redis.asyncio import Redis
from redis.asyncio.connection import Connection, ConnectionPool
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError, DataError, NoScriptError, ResponseError

from xjobs_redis.backend import default_retry
from xjobs_redis.lanes import ScriptLanes, pack_evalsha

# busy for ARGV[1] microseconds of the server's clock, then answers 'slow'
SLOW = """
local t = redis.call('TIME')
local start = t[1] * 1000000 + t[2]
repeat t = redis.call('TIME') until t[1] * 1000000 + t[2] - start > tonumber(ARGV[1])
return 'slow'
"""
ECHO = "return ARGV[1]"
INCR = "return redis.call('INCR', KEYS[1])"
FAILS = "return redis.error_reply('ERR refused by the script')"


async def evalsha(
    lanes: ScriptLanes, client: Redis, sha: str, keys: tuple[str, ...], args: tuple[Any, ...]
) -> Any:
    """A call on `lanes`, taking `client`'s own EVALSHA when no lane is free, as the executor does."""
    return await lanes.evalsha(
        sha, keys, args, lambda: client.evalsha(sha, len(keys), *keys, *args)
    )


class Lab:
    """A client of a 4-connection pool (lanes keep 2), its lanes, and a second client to watch."""

    def __init__(self, client: Redis, watch: Redis, name: str, prefix: str) -> None:
        self.client, self.watch, self.name, self.prefix = client, watch, name, prefix
        self.lanes = ScriptLanes(client)
        self.sha: dict[str, str] = {}

    async def load(self) -> None:
        for label, source in {"slow": SLOW, "echo": ECHO, "incr": INCR, "fails": FAILS}.items():
            self.sha[label] = await self.watch.script_load(source)

    async def call(self, label: str, *args: str | int, keys: tuple[str, ...] = ()) -> Any:
        return await evalsha(self.lanes, self.client, self.sha[label], keys, args)

    async def connections(self) -> list[int]:
        """The server's ids of the lab client's connections."""
        return sorted(
            int(c["id"]) for c in await self.watch.client_list() if c["name"] == self.name
        )


@pytest_asyncio.fixture
async def lab(url: str, client: Redis, prefix: str) -> AsyncIterator[Lab]:
    name = f"lanes-{secrets.token_hex(4)}"
    pooled = Redis.from_url(
        url, decode_responses=True, retry=default_retry(), max_connections=4, client_name=name
    )
    lab = Lab(pooled, client, name, prefix)
    await lab.load()
    try:
        yield lab
    finally:
        await lab.lanes.close()
        await pooled.aclose()


@pytest.mark.asyncio
async def test_calls_reuse_kept_connections_up_to_the_keep_and_overflow_to_the_pool(
    lab: Lab,
) -> None:
    for n in range(20):
        assert await lab.call("echo", n) == str(n)
    assert lab.lanes.kept == 1
    assert len(await lab.connections()) == 1  # one kept connection ran all twenty

    answers = await asyncio.gather(*(lab.call("slow", 20_000) for _ in range(4)))
    assert answers == ["slow"] * 4
    assert lab.lanes.kept == 2  # half the pool's 4; the other calls took the pool's way
    assert len(await lab.connections()) == 4


@pytest.mark.asyncio
@pytest.mark.parametrize("refusal", ["script error", "unknown script"])
async def test_an_error_reply_keeps_its_connection(lab: Lab, refusal: str) -> None:
    await lab.call("echo", "warm")
    before = await lab.connections()
    if refusal == "script error":
        with pytest.raises(ResponseError, match="refused by the script"):
            await lab.call("fails")
    else:
        with pytest.raises(NoScriptError):
            await evalsha(lab.lanes, lab.client, "0" * 40, (), ())
    assert lab.lanes.kept == 1
    assert await lab.call("echo", "after") == "after"
    assert await lab.connections() == before  # the same connection, not dialed again


@pytest.mark.asyncio
async def test_a_killed_connection_falls_back_to_the_pool_and_the_call_lands_once(
    lab: Lab,
) -> None:
    key = f"{lab.prefix}:counter"
    assert await lab.call("incr", keys=(key,)) == 1
    (kept,) = await lab.connections()
    assert await lab.watch.client_kill_filter(_id=str(kept)) == 1

    assert await lab.call("incr", keys=(key,)) == 2  # no error reaches the caller
    assert await lab.watch.get(key) == "2"  # and the script ran once
    assert lab.lanes.kept == 0  # the broken lane went back; the call ran the pool's way
    assert kept not in await lab.connections()

    assert await lab.call("incr", keys=(key,)) == 3
    assert lab.lanes.kept == 1


@pytest.mark.asyncio
async def test_a_cancelled_call_drops_its_connection_so_the_next_reply_is_the_next_calls(
    lab: Lab,
) -> None:
    await lab.call("echo", "warm")
    (first,) = await lab.connections()
    slow = asyncio.create_task(lab.call("slow", 300_000))
    await asyncio.sleep(0.05)
    slow.cancel()
    with pytest.raises(asyncio.CancelledError):
        await slow
    assert lab.lanes.kept == 0

    assert await lab.call("echo", "mine") == "mine"  # not the cancelled call's 'slow'
    assert first not in await lab.connections()


@pytest.mark.asyncio
async def test_many_calls_sent_at_once_answer_in_order_each_error_in_its_place(lab: Lab) -> None:
    async def pipelined() -> list[Any]:
        raise AssertionError("a free lane runs the batch")

    key = f"{lab.prefix}:counter"
    replies = await lab.lanes.evalsha_many(
        [
            (lab.sha["echo"], (), ("first",)),
            (lab.sha["fails"], (), ()),
            ("0" * 40, (), ()),
            (lab.sha["incr"], (key,), ()),
        ],
        pipelined,
    )
    assert replies[0] == "first"
    assert isinstance(replies[1], ResponseError)
    assert "refused by the script" in str(replies[1])
    assert isinstance(replies[2], NoScriptError)
    assert replies[3] == 1
    assert lab.lanes.kept == 1
    assert await lab.call("echo", "next") == "next"  # every reply was read: the lane is in step


@pytest.mark.asyncio
async def test_many_calls_on_a_killed_connection_fall_back_to_the_pipeline(lab: Lab) -> None:
    await lab.call("echo", "warm")
    (kept,) = await lab.connections()
    assert await lab.watch.client_kill_filter(_id=str(kept)) == 1
    fallbacks: list[int] = []

    async def pipelined() -> list[Any]:
        fallbacks.append(1)
        return ["from the pipeline"]

    replies = await lab.lanes.evalsha_many([(lab.sha["echo"], (), ("lost",))], pipelined)
    assert (replies, fallbacks, lab.lanes.kept) == (["from the pipeline"], [1], 0)


@pytest.mark.asyncio
async def test_close_hands_every_kept_connection_back(lab: Lab) -> None:
    await asyncio.gather(*(lab.call("slow", 10_000) for _ in range(2)))
    assert lab.lanes.kept == 2
    await lab.lanes.close()
    assert lab.lanes.kept == 0
    assert not list(lab.client.connection_pool._in_use_connections)  # each one released
    assert await lab.call("echo", "pooled") == "pooled"  # a call after close takes the pool's way
    assert lab.lanes.kept == 0


class CountedConnection(Connection):
    """A connection counting its socket dials."""

    dials = 0

    async def _connect(self) -> None:
        CountedConnection.dials += 1
        await super()._connect()  # type: ignore[no-untyped-call]


@pytest.mark.asyncio
async def test_a_dial_that_fails_is_retried_once_by_the_client_not_again_by_the_lane() -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    CountedConnection.dials = 0
    pool = ConnectionPool(
        port=port,
        connection_class=CountedConnection,
        retry=Retry(NoBackoff(), 2),
        decode_responses=True,
    )
    down = Redis(connection_pool=pool)
    lanes = ScriptLanes(down)
    try:
        with pytest.raises(ConnectionError):
            await evalsha(lanes, down, "f" * 40, (), ())
        assert CountedConnection.dials == 3  # the client's one try and two retries, no more
        assert lanes.kept == 0
    finally:
        await lanes.close()
        await down.aclose()
        await pool.disconnect()


@pytest.mark.asyncio
async def test_a_client_told_not_to_retry_runs_a_call_once(
    url: str, client: Redis, prefix: str
) -> None:
    once = Redis.from_url(url, decode_responses=True, retry=Retry(NoBackoff(), 0))
    lanes = ScriptLanes(once)
    key = f"{prefix}:counter"
    incr = await client.script_load(INCR)
    try:
        assert await evalsha(lanes, once, incr, (key,), ()) == 1
        (kept,) = [int(c["id"]) for c in await client.client_list() if c["cmd"] == "evalsha"]
        assert await client.client_kill_filter(_id=str(kept)) == 1
        with pytest.raises(ConnectionError):  # no fallback to the pool: the client said once
            await evalsha(lanes, once, incr, (key,), ())
        assert await client.get(key) == "1"
        assert lanes.kept == 0
    finally:
        await lanes.close()
        await once.aclose()


@pytest.mark.parametrize(
    "args",
    [
        (),
        ("", "plain", "ünïcödé ✓", "x" * 7_000, 0, -17, 2**63, 1.5, 1e-7),
        ('{"id":"01"}', 30_000, "line\r\nbreak"),
    ],
)
def test_the_packed_call_is_the_bytes_redis_py_writes(args: tuple[str | int | float, ...]) -> None:
    keys = ("xjobs:{xjobs:q}:ready", "xjobs:{xjobs:q}:jöb:1")
    conn = Connection()
    theirs = b"".join(conn.pack_command("EVALSHA", "f" * 40, len(keys), *keys, *args))
    assert pack_evalsha("f" * 40, keys, args, "utf-8", "strict") == theirs


def test_a_packed_call_refuses_what_redis_py_refuses() -> None:
    with pytest.raises(DataError):
        pack_evalsha("f" * 40, (), (True,), "utf-8", "strict")
    with pytest.raises(DataError):
        pack_evalsha("f" * 40, (), (cast(Any, None),), "utf-8", "strict")
