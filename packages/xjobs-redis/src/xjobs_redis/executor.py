"""How the stores reach Redis: scripts by EVALSHA (reloaded on NOSCRIPT), pipelines, the clock argument.

Every script takes `now` as ARGV[1]: an empty string makes the script read the server's `TIME`,
so leases never depend on a worker's clock; an injected test clock passes its reading instead.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from redis.asyncio import Redis
from redis.asyncio.client import Pipeline
from redis.asyncio.cluster import ClusterPipeline, RedisCluster
from redis.exceptions import NoScriptError, ResponseError

from xjobs.clock import Clock, is_system_clock
from xjobs.errors import BackendError
from xjobs_redis.client import Client
from xjobs_redis.errors import interpret_error
from xjobs_redis.lanes import Arg as Arg
from xjobs_redis.lanes import ScriptLanes
from xjobs_redis.replication import Replication
from xjobs_redis.scripts import LuaScript, load_scripts


@dataclass(frozen=True, slots=True)
class Call:
    """One script call: the operation's name, the keys it touches, its other arguments.

    Each script's one builder in `xjobs_redis.calls` makes its calls; no call site lists KEYS.
    """

    script: str
    keys: Sequence[str]
    args: Sequence[Arg]


# A pipeline of either client, single Redis or Redis Cluster.
AnyPipeline = Pipeline | ClusterPipeline
# A plain command queued on a pipeline (a read, or the SADD beside a scheduler fire).
Command = Callable[[AnyPipeline], object]


class Executor:
    """Runs the package's scripts and commands on one client, translating engine errors."""

    def __init__(
        self,
        client: Client,
        clock: Clock,
        scripts: dict[str, LuaScript] | None = None,
        replication: Replication | None = None,
    ) -> None:
        self.client = client
        self._clock = clock
        self._server_time = is_system_clock(clock)
        self._scripts = scripts if scripts is not None else load_scripts()
        self._replication = replication
        # one server's single script calls run on kept connections; a Cluster routes each by
        # key; with `wait_replicas` each call is a pipeline that ends in its WAIT
        self._lanes = (
            ScriptLanes(client)
            if isinstance(client, Redis)
            and not client.single_connection_client
            and replication is None
            else None
        )

    async def close(self) -> None:
        """Hand the kept connections back, then close the client."""
        if self._lanes is not None:
            await self._lanes.close()
        await self.client.aclose()

    def now(self) -> str:
        """ARGV[1] of every script: '' for the server's clock, else the injected clock's reading."""
        return "" if self._server_time else str(self._clock.now_ms())

    async def load(self) -> None:
        """SCRIPT LOAD every script in one round trip (at open, and after a NOSCRIPT). A server
        without script flags (before Redis 7) refuses the flagged ones: they are loaded again
        without their flag (one more round trip, once)."""
        shas = await self._load()
        if any(isinstance(sha, ResponseError) for sha in shas) and self._scripts == load_scripts():
            self._scripts = load_scripts(flags=False)
            shas = await self._load()
        scripts = list(self._scripts.values())
        for script, sha in zip(scripts, shas, strict=True):
            if isinstance(sha, Exception):
                raise interpret_error(sha) from sha
            if sha != script.sha:
                raise BackendError(f"Redis loaded script {script.name} as {sha}, not {script.sha}")

    async def _load(self) -> list[Any]:
        if isinstance(self.client, RedisCluster):
            return await self._load_on_primaries(self.client)
        try:
            async with self.client.pipeline(transaction=False) as pipe:
                for script in self._scripts.values():
                    pipe.script_load(script.source)
                return list(await pipe.execute(raise_on_error=False))
        except Exception as exc:
            raise interpret_error(exc) from exc

    async def _load_on_primaries(self, client: RedisCluster) -> list[Any]:
        """SCRIPT LOAD on a cluster: each script on every primary (the cluster client sends it
        to them all), so an EVALSHA routed to any key's node finds it."""
        shas: list[Any] = []
        for script in self._scripts.values():
            try:
                shas.append(await client.script_load(script.source))
            except ResponseError as exc:
                shas.append(exc)
            except Exception as exc:
                raise interpret_error(exc) from exc
        return shas

    async def run(self, call: Call) -> Any:
        """One script call, one round trip (two more after a server restart flushed the scripts)."""
        sha = self._scripts[call.script].sha
        try:
            try:
                return await self._evalsha(sha, call)
            except NoScriptError:
                await self.load()
                return await self._evalsha(sha, call)
        except Exception as exc:
            raise interpret_error(exc) from exc

    async def _evalsha(self, sha: str, call: Call) -> Any:
        keys = call.keys

        def pooled() -> Awaitable[Any]:
            return self.client.evalsha(sha, len(keys), *keys, *call.args)

        if self._lanes is not None:
            return await self._lanes.evalsha(sha, keys, call.args, pooled)
        if self._replication is not None:
            (reply,) = await self._pipelined([call])
            if isinstance(reply, Exception):
                raise reply
            return reply
        return await pooled()

    async def batch(self, calls: Sequence[Call | Command]) -> list[Any]:
        """Run `calls` in one pipelined round trip; answers each one's reply, in order.

        A script the server no longer knows (NOSCRIPT after a restart) ran nothing; after a
        reload only those calls are sent again, so no call runs twice.
        """
        if not calls:
            return []
        replies = await self._send(calls)
        missing = [i for i, reply in enumerate(replies) if isinstance(reply, NoScriptError)]
        if missing:
            await self.load()
            for i, reply in zip(
                missing, await self._send([calls[i] for i in missing]), strict=True
            ):
                replies[i] = reply
        for reply in replies:
            if isinstance(reply, Exception):
                raise interpret_error(reply) from reply
        return replies

    async def _send(self, calls: Sequence[Call | Command]) -> list[Any]:
        try:
            if self._lanes is not None:
                scripts = [
                    (self._scripts[call.script].sha, call.keys, call.args)
                    for call in calls
                    if isinstance(call, Call)
                ]
                if len(scripts) == len(calls):  # scripts alone: packed on a lane
                    return await self._lanes.evalsha_many(scripts, lambda: self._pipelined(calls))
            return await self._pipelined(calls)
        except Exception as exc:
            raise interpret_error(exc) from exc

    async def _pipelined(self, calls: Sequence[Call | Command]) -> list[Any]:
        """`calls` on a redis-py pipeline: each error reply in its place, as `_send` answers;
        with `wait_replicas`, then its WAIT on the same connection (refused if too few replicas
        acknowledged the calls' writes)."""
        async with self.client.pipeline(transaction=False) as pipe:
            for call in calls:
                if isinstance(call, Call):
                    sha = self._scripts[call.script].sha
                    # by name: a cluster pipeline blocks its `evalsha` method, not the command
                    # (routed by its first key, as a single EVALSHA is)
                    pipe.execute_command("EVALSHA", sha, len(call.keys), *call.keys, *call.args)
                else:
                    call(pipe)
            if self._replication is None:
                return list(await pipe.execute(raise_on_error=False))
            pipe.execute_command(*self._replication.command())
            *replies, acknowledged = await pipe.execute(raise_on_error=False)
        self._replication.check(acknowledged)
        return replies
