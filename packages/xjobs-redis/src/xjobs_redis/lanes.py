"""Script calls on lanes (`xjobs.lanes`), connections kept out of redis-py's pool between calls:
`Redis.execute_command` spends some 30 µs of CPU a call on the pool, its lock and its retry
wrapper, and its `pack_command` some 10 µs more on the arguments' type checks."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from redis.asyncio import Redis
from redis.asyncio.connection import AbstractConnection, ConnectionPool
from redis.exceptions import ConnectionError, DataError, ResponseError, TimeoutError

from xjobs.lanes import Lanes

# Kept connections at most (or half the pool's limit when it is lower): more concurrent calls
# than this take the pool's way.
KEEP = 16

Arg = str | int | float
# One EVALSHA: the script's SHA1, its keys, its other arguments.
Script = tuple[str, Sequence[str], Sequence[Arg]]


class _Pool:
    """redis-py's pool as lanes take from it; a connection a call broke is disconnected first (the
    pool dials it again when it is next taken)."""

    def __init__(self, pool: ConnectionPool) -> None:
        self._pool = pool

    async def acquire(self) -> AbstractConnection:
        conn: AbstractConnection = await self._pool.get_connection()  # type: ignore[no-untyped-call]
        return conn

    async def release(self, conn: AbstractConnection, *, broken: bool) -> None:
        try:
            if broken:
                await conn.disconnect(nowait=True)
        finally:
            await self._pool.release(conn)

    def usable(self, conn: AbstractConnection) -> bool:
        """Not one redis-py marked to reconnect (a server's maintenance notice, redis-py 6+) or
        to authenticate again with a fresh token: the pool's release would act on either, so it
        goes back, dropped. A connection that lost its server dials again when it sends."""
        should_reconnect = getattr(conn, "should_reconnect", None)
        if should_reconnect is not None and should_reconnect():
            return False
        return getattr(conn, "_re_auth_token", None) is None


class ScriptLanes:
    """EVALSHA (one, or many sent at once) on up to `KEEP` kept connections of `client`'s pool.
    A server's error reply (NOSCRIPT, a script's own error) leaves the connection ready, so it is
    kept; a lost connection or a timeout hands it back and, when the client retries at all, the
    call runs the pool's way with the client's retry (the lane was one attempt more before those;
    every script tolerates a second run)."""

    def __init__(self, client: Redis) -> None:
        pool = client.connection_pool
        retries = _retries(pool.connection_kwargs.get("retry"))
        self._lanes: Lanes[AbstractConnection] = Lanes(
            _Pool(pool),
            min(KEEP, pool.max_connections // 2),
            kept_on=(ResponseError,),
            # a client told not to retry runs a call once, on its lane or the pool
            fall_back_on=(ConnectionError, TimeoutError) if retries > 0 else (),
        )

    @property
    def kept(self) -> int:
        """The connections taken from the pool and kept: idle, or running a call."""
        return self._lanes.kept

    async def evalsha(
        self,
        sha: str,
        keys: Sequence[str],
        args: Sequence[Arg],
        pooled: Callable[[], Awaitable[Any]],
    ) -> Any:
        """One script call (`pooled`: the client's own EVALSHA, when no lane is free)."""
        return await self._lanes.run(lambda conn: _evalsha(conn, sha, keys, args), pooled)

    async def evalsha_many(
        self, scripts: Sequence[Script], pooled: Callable[[], Awaitable[list[Any]]]
    ) -> list[Any]:
        """`scripts` sent at once and their replies read in order, as a pipeline answers them:
        an error reply in its place, not raised (`pooled`: the pipeline, when no lane is free)."""
        return await self._lanes.run(lambda conn: _evalsha_many(conn, scripts), pooled)

    async def close(self) -> None:
        """Hand every idle kept connection back; one running a call goes back when it ends."""
        await self._lanes.close()


def _retries(retry: Any) -> int:
    """How many times the client's `Retry` retries a call: `get_retries()` from redis-py 6, the
    attribute it reads on 5.3, none without a `Retry`."""
    if retry is None:
        return 0
    get_retries = getattr(retry, "get_retries", None)
    return int(get_retries() if get_retries is not None else retry._retries)


async def _evalsha(
    conn: AbstractConnection, sha: str, keys: Sequence[str], args: Sequence[Arg]
) -> Any:
    encoder = conn.encoder
    await conn.send_packed_command(
        pack_evalsha(sha, keys, args, encoder.encoding, encoder.encoding_errors)
    )
    return await conn.read_response()


async def _evalsha_many(conn: AbstractConnection, scripts: Sequence[Script]) -> list[Any]:
    encoder = conn.encoder
    encoding, errors = encoder.encoding, encoder.encoding_errors
    await conn.send_packed_command(
        b"".join(pack_evalsha(sha, keys, args, encoding, errors) for sha, keys, args in scripts)
    )
    replies: list[Any] = []
    for _ in scripts:
        try:
            replies.append(await conn.read_response())
        except ResponseError as exc:  # the reply read whole: the next one follows it
            replies.append(exc)
    return replies


def pack_evalsha(
    sha: str, keys: Sequence[str], args: Sequence[Arg], encoding: str, errors: str
) -> bytes:
    """EVALSHA as the bytes redis-py's `pack_command` writes (a RESP array of bulk strings): a
    string encoded as the connection encodes, a number by its `repr`, a bool refused."""
    items = (sha, len(keys), *keys, *args)
    out = [b"*%d\r\n$7\r\nEVALSHA\r\n" % (len(items) + 1)]
    for item in items:
        if isinstance(item, str):
            data = item.encode(encoding, errors)
        elif isinstance(item, int | float) and not isinstance(item, bool):
            data = repr(item).encode()
        else:
            raise DataError(f"invalid input of type {type(item).__name__!r} for a script call")
        out.append(b"$%d\r\n%b\r\n" % (len(data), data))
    return b"".join(out)
