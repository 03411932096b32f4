"""Server-side counters: statements and their time per database (pg_stat_statements), commands,
memory and CPU (Redis MONITOR and INFO), a SQLite file's commits (data_version); and the Postgres upkeep W6 waits out after its fill."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import time
from typing import Any
from urllib.parse import urlsplit

import asyncpg
from redis.asyncio import Redis

STATEMENTS = r"""
select coalesce(sum(calls), 0)::bigint
from pg_stat_statements s join pg_database d on d.oid = s.dbid
where d.datname = $1 and s.query !~* '^\s*(begin|commit|rollback|start transaction)\b'
"""
ENABLE = "create extension if not exists pg_stat_statements"
# the milliseconds the server spent executing (and planning) a database's statements
STATEMENT_MS = """
select coalesce(sum(total_exec_time + total_plan_time), 0)::float8
from pg_stat_statements s join pg_database d on d.oid = s.dbid
where d.datname = $1
"""


async def quiesce(url: str) -> None:
    """Vacuum, analyze and checkpoint the database at `url`, so the background work a bulk fill
    leaves (autovacuum, dirty buffers) does not land in the measured window."""
    conn = await asyncpg.connect(url)
    try:
        await conn.execute("vacuum (analyze)")
        await conn.execute("checkpoint")
    finally:
        await conn.close()


class PostgresStatements:
    """Statements a database's clients have run, transaction control left out (BEGIN/COMMIT)."""

    def __init__(self, admin_url: str, database: str) -> None:
        self.admin_url = admin_url
        self.database = database

    async def count(self) -> int:
        conn = await asyncpg.connect(self.admin_url)
        try:
            await conn.execute(ENABLE)
            total: int = await conn.fetchval(STATEMENTS, self.database)
        finally:
            await conn.close()
        return total

    async def server_seconds(self) -> float:
        """Seconds the server has spent executing this database's statements, every client's
        (`pg_stat_statements`: execution and planning, commits' WAL flushes included)."""
        conn = await asyncpg.connect(self.admin_url)
        try:
            await conn.execute(ENABLE)
            ms: float = await conn.fetchval(STATEMENT_MS, self.database)
        finally:
            await conn.close()
        return ms / 1000.0


class RedisCommands:
    """Commands run on one logical database (MONITOR), and the server's memory (INFO)."""

    def __init__(self, url: str) -> None:
        self.url = url

    async def _info(self, section: str) -> dict[str, Any]:
        client = Redis.from_url(self.url)
        try:
            info: dict[str, Any] = await client.info(section)
        finally:
            await client.aclose()
        return info

    async def sent_in(self, window_s: float) -> tuple[int, int]:
        """Commands run on this URL's logical database in the next `window_s` seconds, by
        MONITOR: (sent by clients, executed). A command a Lua script runs is shown as the
        script's (`lua`): it counts as executed, not as sent, so a script call is one sent."""
        db = int(urlsplit(self.url).path.lstrip("/") or 0)
        client = Redis.from_url(self.url)
        sent = executed = 0
        try:
            async with client.monitor() as monitor:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(window_s):
                        while True:
                            command = await monitor.next_command()
                            if int(command["db"]) == db:
                                executed += 1
                                sent += command["client_type"] != "lua"
        finally:
            await client.aclose()
        return sent, executed

    async def used_memory(self) -> int:
        return int((await self._info("memory"))["used_memory"])

    async def server_seconds(self) -> float:
        """CPU seconds of the whole Redis server process, user and system (`INFO cpu`): the bench
        starts a server of its own and runs one contender at a time on it."""
        cpu = await self._info("cpu")
        return float(cpu["used_cpu_user"]) + float(cpu["used_cpu_sys"])


class SqliteCommits:
    """W5 on SQLite: the commits that wrote the file, every connection's but the counter's own.
    SQLite has no server to ask: a connection of the counter's own reads `PRAGMA data_version`
    every POLL_S on a thread (it moves when another connection commits a change; a read
    transaction does not move it), and counts the moves. Two commits within one poll count once;
    an idle deployment's writes are seconds apart."""

    POLL_S = 0.001

    def __init__(self, url: str) -> None:
        self.path = urlsplit(url).path

    def _count(self, window_s: float) -> int:
        conn = sqlite3.connect(self.path, timeout=30)
        commits = 0
        try:
            (seen,) = conn.execute("pragma data_version").fetchone()
            deadline = time.monotonic() + window_s
            while time.monotonic() < deadline:
                time.sleep(self.POLL_S)
                (version,) = conn.execute("pragma data_version").fetchone()
                commits += version != seen
                seen = version
        finally:
            conn.close()
        return commits

    async def commits_in(self, window_s: float) -> int:
        """The commits other connections make to the file in the next `window_s` seconds."""
        return await asyncio.to_thread(self._count, window_s)
