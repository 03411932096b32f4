"""A real Sentinel group for tests: a primary, a replica and three sentinels on loopback, never mocked.

Each group is private to its test (started by `sentinel_group()`, removed by `remove()`), so a
test may kill its primary and watch the sentinels promote the replica.
"""

from __future__ import annotations

import atexit
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from xjobs.testing.servers import ServerUnavailable, free_port, last_line
from xjobs_redis.servers import _Process

SERVICE = "xjobs"
SENTINELS = 3
QUORUM = 2
START_WITHIN_S = 30.0


@dataclass(slots=True)
class SentinelProcess:
    """One `redis-server --sentinel` child watching the group's service."""

    executable: str
    root: Path
    port: int
    process: subprocess.Popen[bytes] | None = None

    def start(self, primary_port: int, down_after_ms: int) -> None:
        config = self.root / "sentinel.conf"
        config.write_text(
            f"port {self.port}\nbind 127.0.0.1\ndir {self.root}\n"
            f"sentinel monitor {SERVICE} 127.0.0.1 {primary_port} {QUORUM}\n"
            f"sentinel down-after-milliseconds {SERVICE} {down_after_ms}\n"
            f"sentinel failover-timeout {SERVICE} 10000\n"
            f"sentinel parallel-syncs {SERVICE} 1\n"
        )
        with open(self.root / "sentinel.log", "ab") as log:
            self.process = subprocess.Popen(
                [self.executable, str(config), "--sentinel"], stdout=log, stderr=subprocess.STDOUT
            )
        deadline = time.monotonic() + START_WITHIN_S
        while self.process.poll() is None and time.monotonic() < deadline:
            if _reply(self.port, b"PING\r\n").startswith(b"+PONG"):
                return
            time.sleep(0.02)
        told = (self.root / "sentinel.log").read_text(errors="replace")
        self.stop()
        raise ServerUnavailable(f"redis-server --sentinel did not start: {last_line(told)}")

    def primary_port(self) -> int | None:
        """The port this sentinel names as the service's primary now."""
        command = f"SENTINEL GET-MASTER-ADDR-BY-NAME {SERVICE}\r\n".encode()
        lines = _reply(self.port, command).split(b"\r\n")
        # *2 / $9 / 127.0.0.1 / $4 / 6380
        return int(lines[4]) if len(lines) > 4 and lines[4].isdigit() else None

    def stop(self) -> None:
        process, self.process = self.process, None
        if process is not None and process.poll() is None:
            process.kill()
            process.wait(timeout=30)


@dataclass(slots=True)
class SentinelGroup:
    """A primary, its replica and three sentinels; `url()` names them as xjobs takes them."""

    servers: list[_Process]
    sentinels: list[SentinelProcess] = field(default_factory=list)

    def url(self, query: str = "") -> str:
        """`redis+sentinel://` over every sentinel of the group, service `xjobs`, database 0."""
        hosts = ",".join(f"127.0.0.1:{s.port}" for s in self.sentinels)
        return f"redis+sentinel://{hosts}/{SERVICE}/0" + (f"?{query}" if query else "")

    def primary_url(self) -> str:
        """A plain `redis://` URL of the server the sentinels name as primary now."""
        return f"redis://127.0.0.1:{self.primary().port}/0"

    def primary(self) -> _Process:
        """The server the first answering sentinel names as the primary."""
        for sentinel in self.sentinels:
            port = sentinel.primary_port()
            for server in self.servers:
                if server.port == port:
                    return server
        raise ServerUnavailable("no sentinel names a primary of the group")

    def kill_primary(self) -> _Process:
        """SIGKILL the primary (no flush, no goodbye); answers the server killed."""
        server = self.primary()
        server.stop("kill")
        return server

    def await_failover(self, old: _Process, timeout_s: float = 60.0) -> _Process:
        """Wait until a majority of sentinels names another primary; answers it."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            ports = [s.primary_port() for s in self.sentinels]
            moved = [p for p in ports if p is not None and p != old.port]
            if len(moved) >= QUORUM:
                return next(s for s in self.servers if s.port == moved[0])
            time.sleep(0.05)
        raise AssertionError(f"the sentinels did not promote a replica within {timeout_s} s")

    def await_replicated(self, timeout_s: float = 30.0) -> None:
        """Wait until a replica of the group reports its link to its primary up."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            infos = [_reply(server.port, b"INFO replication\r\n") for server in self.servers]
            if any(b"master_link_status:up" in info for info in infos):
                return
            time.sleep(0.05)
        raise ServerUnavailable("the replica never finished its first sync with the primary")

    def remove(self) -> None:
        for sentinel in self.sentinels:
            sentinel.stop()
            shutil.rmtree(sentinel.root, ignore_errors=True)
        for server in self.servers:
            server.remove()


def sentinel_group(*, down_after_ms: int = 1000) -> SentinelGroup:
    """Start a primary, a replica of it and three sentinels (a quorum of two) on loopback; the
    caller `remove()`s the group (it is removed at exit otherwise)."""
    executable = shutil.which("redis-server")
    if executable is None:
        raise ServerUnavailable("no redis-server on PATH for a Sentinel group")
    primary = _Process(executable, _root("primary"), free_port())
    replica_port = free_port()
    replica = _Process(
        executable,
        _root("replica"),
        replica_port,
        extra=("--replicaof", "127.0.0.1", str(primary.port)),
    )
    group = SentinelGroup([primary, replica])
    atexit.register(group.remove)
    primary.start()
    replica.start()
    group.await_replicated()
    for _ in range(SENTINELS):
        sentinel = SentinelProcess(executable, _root("sentinel"), free_port())
        group.sentinels.append(sentinel)
        sentinel.start(primary.port, down_after_ms)
    _await_sentinels_know_each_other(group)
    return group


def _await_sentinels_know_each_other(group: SentinelGroup, timeout_s: float = 30.0) -> None:
    """Sentinels find each other through the primary's hello channel (every ~2 s); a failover
    needs a quorum that knows its peers and the replica."""
    deadline = time.monotonic() + timeout_s
    command = f"SENTINEL MASTER {SERVICE}\r\n".encode()
    while time.monotonic() < deadline:
        replies = [_reply(s.port, command) for s in group.sentinels]
        if all(_field(r, b"num-other-sentinels") == SENTINELS - 1 for r in replies) and all(
            _field(r, b"num-slaves") == 1 for r in replies
        ):
            return
        time.sleep(0.1)
    raise ServerUnavailable("the sentinels did not discover each other and the replica in time")


def _field(reply: bytes, name: bytes) -> int | None:
    """A field of a `SENTINEL MASTER` reply (a flat list of names and values)."""
    lines = reply.split(b"\r\n")
    for i, line in enumerate(lines):
        if line == name and i + 2 < len(lines) and lines[i + 2].lstrip(b"-").isdigit():
            return int(lines[i + 2])
    return None


def _reply(port: int, command: bytes) -> bytes:
    """One inline command's raw reply from the server on `port` (empty if it does not answer)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as conn:
            conn.sendall(command)
            chunks = b""
            conn.settimeout(0.2)
            while True:
                try:
                    chunk = conn.recv(65536)
                except TimeoutError:
                    break
                if not chunk:
                    break
                chunks += chunk
            return chunks
    except OSError:
        return b""


def _root(role: str) -> Path:
    return Path(tempfile.mkdtemp(prefix=f"xjobs-redis-sentinel-{role}-"))
