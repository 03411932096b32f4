"""A Postgres primary and a streaming standby from the local binaries (pg_basebackup, standby.signal,
primary_conninfo), synchronous or asynchronous, for the failover scenarios; stopped by whoever started them.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass

import asyncpg

from xjobs_pg.servers import Cluster, ServerUnavailable, new_cluster

STANDBY_NAME = "xjobs_standby"
STREAMING_WITHIN_S = 60.0


@dataclass
class ReplicaPair:
    """A primary streaming to one standby on loopback; `url` lists both hosts, so a client finds
    whichever one takes writes (`target_session_attrs=read-write`)."""

    primary: Cluster
    standby: Cluster
    synchronous: bool

    @property
    def url(self) -> str:
        """The multi-host URL, primary first."""
        hosts = f"127.0.0.1:{self.primary.port},127.0.0.1:{self.standby.port}"
        return f"postgresql://postgres@{hosts}/postgres?target_session_attrs=read-write"

    @property
    def setting(self) -> str:
        """The replication setting, as the ledger names it."""
        if self.synchronous:
            return "synchronous_commit=on, one synchronous standby"
        return "asynchronous streaming"

    def stop_primary(self) -> None:
        """`pg_ctl stop -m immediate` of the primary: it dies as a crashed host does."""
        self.primary.stop("immediate")

    def promote(self) -> None:
        """`pg_ctl promote` of the standby, returning once it takes writes."""
        self.standby.run("pg_ctl", "promote", "-w", "-t", "60")

    def detach(self) -> None:
        """Cut the standby off its primary: restarted with no `primary_conninfo`, it receives
        nothing from here on, as a standby behind a partition receives nothing. (A reload does not
        do it here: the copied postgresql.conf disagrees with the command line, and the server
        then applies none of the file's changes.)"""
        self.standby.stop("fast")
        self.standby.settings = (*self.standby.settings, "primary_conninfo=")
        self.standby.start()

    def close(self) -> None:
        """Stop both servers and remove their directories."""
        self.standby.remove()
        self.primary.remove()


def start_pair(*, synchronous: bool) -> ReplicaPair:
    """A primary and a standby made from it with `pg_basebackup -R`, streaming (in sync when
    `synchronous`) before this returns."""
    primary_settings = ["wal_level=replica", "max_wal_senders=10", "wal_keep_size=256MB"]
    if synchronous:
        primary_settings += [f"synchronous_standby_names={STANDBY_NAME}", "synchronous_commit=on"]
    primary = new_cluster(primary_settings)
    primary.start()
    conninfo = f"host=127.0.0.1 port={primary.port} user=postgres application_name={STANDBY_NAME}"
    standby = new_cluster(["hot_standby=on", f"primary_conninfo={conninfo}"], initdb=False)
    pair = ReplicaPair(primary, standby, synchronous)
    try:
        standby.run(
            "pg_basebackup",
            *("-h", "127.0.0.1", "-p", str(primary.port), "-U", "postgres"),
            *("-R", "-X", "stream", "-c", "fast"),
        )
        # the later line wins over the one -R wrote (which names no application_name)
        conninfo = (
            f"host=127.0.0.1 port={primary.port} user=postgres application_name={STANDBY_NAME}"
        )
        with (standby.root / "data" / "postgresql.auto.conf").open("a") as conf:
            conf.write(f"primary_conninfo = '{conninfo}'\n")
        standby.start()
        asyncio.run(_streaming(primary.url, synchronous))
    except BaseException:
        pair.close()
        raise
    return pair


async def _streaming(primary_url: str, synchronous: bool) -> None:
    """Wait until the primary sees the standby streaming (and as its synchronous one)."""
    wanted = "sync" if synchronous else "async"
    deadline = time.monotonic() + STREAMING_WITHIN_S
    conn = await asyncpg.connect(primary_url, timeout=10)
    try:
        while True:
            state = await conn.fetchval(
                "select sync_state from pg_stat_replication "
                "where application_name = $1 and state = 'streaming'",
                STANDBY_NAME,
            )
            if state == wanted:
                return
            if time.monotonic() > deadline:
                raise ServerUnavailable(f"the standby is not streaming ({state!r}, not {wanted})")
            await asyncio.sleep(0.1)
    finally:
        with contextlib.suppress(Exception):
            await conn.close()


async def replay_lag_bytes(pair: ReplicaPair) -> int:
    """How many bytes of WAL the primary sent that the standby has not replayed yet."""
    conn = await asyncpg.connect(pair.primary.url, timeout=10)
    try:
        lag = await conn.fetchval(
            "select coalesce(pg_wal_lsn_diff(pg_current_wal_lsn(), replay_lsn), 0)::bigint "
            "from pg_stat_replication where application_name = $1",
            STANDBY_NAME,
        )
    finally:
        await conn.close()
    return int(lag or 0)
