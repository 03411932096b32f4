"""Noticing that the server lost our data: its `run_id` watched, and its persistence read.

A baseline is read at open (one pipelined round trip: `INFO server`, `INFO persistence`,
`CONFIG GET save`, `CONFIG GET maxmemory-policy`, the queue set's `EXISTS`; on a Cluster, the
same five from the node holding the queue set, one at a time). A server that keeps
nothing on disk logs WARNING `jobs.redis.no-persistence`; one that may evict keys (a
`maxmemory-policy` other than `noeviction`) logs ERROR `jobs.redis.eviction-policy`: under memory
pressure it would drop jobs without a trace. It is read again only when the wake subscription is
(re)established: a restart drops every connection, so the wake re-dials, and its probe is
followed by this check. An idle worker sends nothing more (the idle budget is untouched).

When the `run_id` changed (the server restarted) and the server keeps no persistence (no AOF, no
RDB save points), or our prefix's queue set existed and is gone, it logs ERROR
`jobs.redis.data-lost` and sets `health["data_lost"]`, which stays set for the operator.
"""

from __future__ import annotations

import logging
from typing import Any

from redis.asyncio.cluster import RedisCluster
from redis.exceptions import ResponseError

from xjobs.contract.backend import Backend
from xjobs_redis.client import Client
from xjobs_redis.keys import Keys

log = logging.getLogger("xjobs_redis.health")

MAY_BE_LOST = "every job enqueued, settled or acknowledged since the server's last save"
MAY_BE_EVICTED = "any job, lease or slot key once the server reaches maxmemory"


def server_health(backend: Backend) -> dict[str, Any] | None:
    """The Redis backend's `health` dict (`None` for another backend): `run_id`, `persistence`
    ('aof', 'rdb' or 'none'), `eviction_policy` (`None` when CONFIG is refused), `data_lost`
    (sticky) and `data_lost_reason`."""
    return backend.health if backend.name == "redis" else None


class ServerWatch:
    """Holds the last `run_id` seen and the health flag; `check` compares a fresh reading."""

    def __init__(self, client: Client, keys: Keys) -> None:
        self._client = client
        self._keys = keys
        self._had_queues = False
        self.health: dict[str, Any] = {
            "run_id": None,
            "persistence": None,
            "eviction_policy": None,
            "data_lost": False,
            "data_lost_reason": None,
        }

    async def _replies(self) -> list[Any]:
        """The five readings, an error in place of a refused one. On a Cluster they are read
        from the node that holds the queue set (its `run_id`, its persistence), one command at a
        time: redis-py's cluster pipeline refuses INFO and CONFIG."""
        client, queues = self._client, self._keys.queues()
        if not isinstance(client, RedisCluster):
            async with client.pipeline(transaction=False) as pipe:
                pipe.info("server")
                pipe.info("persistence")
                pipe.config_get("save")
                pipe.config_get("maxmemory-policy")
                pipe.exists(queues)
                return list(await pipe.execute(raise_on_error=False))
        node = client.get_node_from_key(queues)
        replies: list[Any] = []
        for command in (("INFO", "server"), ("INFO", "persistence")):
            replies.append(await client.execute_command(*command, target_nodes=node))
        for parameter in ("save", "maxmemory-policy"):
            try:
                replies.append(await client.config_get(parameter, target_nodes=node))
            except ResponseError as exc:  # CONFIG refused (a managed server)
                replies.append(exc)
        replies.append(await client.exists(queues))
        return replies

    async def _read(self) -> tuple[str, str, bool, dict[str, Any]]:
        server, persistence, save, policy, exists = await self._replies()
        if isinstance(server, Exception) or isinstance(persistence, Exception):
            raise server if isinstance(server, Exception) else persistence
        if int(persistence.get("aof_enabled", 0)) == 1:
            mode = "aof"
        elif isinstance(save, Exception):  # CONFIG refused (a managed server): trust its saves
            mode = "rdb" if persistence.get("rdb_last_bgsave_status") == "ok" else "none"
        else:
            mode = "rdb" if str(save.get("save", "")).strip() else "none"
        if not isinstance(policy, Exception):
            self.health["eviction_policy"] = policy.get("maxmemory-policy")
        return str(server["run_id"]), mode, bool(exists), dict(persistence)

    async def open(self) -> None:
        """The baseline at open; a server that refuses INFO only loses the check (logged)."""
        try:
            await self.baseline()
        except Exception as exc:
            log.warning("jobs.redis.health-check-failed", extra={"error": repr(exc)})

    async def baseline(self) -> None:
        """Read at open: the run_id to compare against, and a warning for a server that keeps nothing."""
        run_id, mode, exists, _ = await self._read()
        self.health.update(run_id=run_id, persistence=mode)
        self._had_queues = exists
        if mode == "none":
            log.warning(
                "jobs.redis.no-persistence",
                extra={"run_id": run_id, "may_be_lost_on_restart": MAY_BE_LOST},
            )
        policy = self.health["eviction_policy"]
        if policy not in (None, "noeviction"):
            log.error(
                "jobs.redis.eviction-policy",
                extra={"maxmemory_policy": policy, "may_be_evicted": MAY_BE_EVICTED},
            )

    async def check(self) -> None:
        """Read again (after a reconnect); log and flag a restart that lost data."""
        run_id, mode, exists, persistence = await self._read()
        before = self.health["run_id"]
        self.health.update(run_id=run_id, persistence=mode)
        lost_queues = self._had_queues and not exists
        self._had_queues = exists
        restarted = before is not None and before != run_id
        if not (restarted and mode == "none") and not lost_queues:
            return
        reason = (
            f"the queue set {self._keys.queues()} is gone"
            if lost_queues
            else "the server restarted without persistence (no AOF, no RDB save points)"
        )
        self.health.update(data_lost=True, data_lost_reason=reason)
        log.error(
            "jobs.redis.data-lost",
            extra={
                "reason": reason,
                "run_id_before": before,
                "run_id_after": run_id,
                "persistence": mode,
                "rdb_last_save_time": persistence.get("rdb_last_save_time"),
                "may_be_lost": MAY_BE_LOST,
            },
        )
