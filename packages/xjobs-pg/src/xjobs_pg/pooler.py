"""A real pgbouncer for tests, in front of the test Postgres: started once per process and pool mode.

Debian's `pgbouncer` (found on PATH or in /usr/sbin) listens on a loopback port and pools every
database of one server; root hands it to the server's unprivileged user, as servers.py does.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Literal
from urllib.parse import SplitResult, urlsplit

import psycopg

from xjobs.testing.servers import ServerUnavailable, free_port, last_line

__all__ = ["PoolMode", "await_served", "pgbouncer_url", "pgbouncer_version"]

PoolMode = Literal["session", "transaction"]
SEARCHED = ("/usr/sbin/pgbouncer", "/usr/local/sbin/pgbouncer", "/usr/local/bin/pgbouncer")
READY_S = 20.0
SERVER_POOL_SIZE = 20


@dataclasses.dataclass(slots=True)
class _Bouncer:
    """One pgbouncer process and its directory (config, user list, log), removed at exit."""

    proc: subprocess.Popen[bytes]
    root: Path
    port: int
    owner: int = dataclasses.field(default_factory=os.getpid)

    def remove(self) -> None:
        if os.getpid() != self.owner:
            return  # a forked child must not take its parent's pooler down
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.root, ignore_errors=True)


_lock = threading.Lock()
_started: dict[tuple[str, PoolMode], str] = {}


def pgbouncer_url(server_url: str, mode: PoolMode = "transaction") -> str:
    """A URL reaching `server_url` through a pgbouncer in `mode`, started on the first call.

    The URL declares the pooler (`xjobs_pooler=<mode>`), as a deployment behind one must.
    """
    with _lock:
        found = _started.get((server_url, mode))
        if found is None:
            found = _started[(server_url, mode)] = _start(server_url, mode)
        return found


def await_served(url: str, timeout_s: float = READY_S) -> None:
    """Return once a statement crosses the pooler at `url` to its server (or `ServerUnavailable`)."""
    plain = url.split("?", 1)[0]
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with psycopg.connect(plain, connect_timeout=5, prepare_threshold=None) as conn:
                conn.execute("select 1")
                return
        except psycopg.Error as exc:
            if time.monotonic() > deadline:
                raise ServerUnavailable(
                    f"nothing crossed the pooler in {timeout_s} s: {exc}"
                ) from None
        time.sleep(0.05)


def pgbouncer_version() -> tuple[int, ...]:
    """The installed pgbouncer's version, e.g. `(1, 18, 0)`."""
    done = subprocess.run([_executable(), "--version"], capture_output=True, text=True, check=False)
    words = done.stdout.split()
    if len(words) < 2 or words[0] != "PgBouncer":
        raise ServerUnavailable(f"pgbouncer --version answered {last_line(done.stdout)!r}")
    return tuple(int(part) for part in words[1].split(".") if part.isdigit())


def _executable() -> str:
    for candidate in (shutil.which("pgbouncer"), *SEARCHED):
        if candidate and Path(candidate).exists():
            return candidate
    raise ServerUnavailable("no pgbouncer on PATH or in /usr/sbin (Debian package `pgbouncer`)")


def _start(server_url: str, mode: PoolMode) -> str:
    executable = _executable()
    server = urlsplit(server_url)
    user = _unprivileged_user()
    root = Path(tempfile.mkdtemp(prefix="xjobs-pgbouncer-"))
    port = free_port()
    login = server.username or "postgres"
    (root / "users.txt").write_text(f'"{login}" ""\n')
    (root / "pgbouncer.ini").write_text(_config(root, port, server, mode))
    if user is not None:
        for path in (root, *root.iterdir()):
            os.chown(path, user.pw_uid, user.pw_gid)
    proc = subprocess.Popen(
        [executable, str(root / "pgbouncer.ini")],
        cwd=root,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        user=None if user is None else user.pw_uid,
        group=None if user is None else user.pw_gid,
        extra_groups=None if user is None else [],
    )
    bouncer = _Bouncer(proc, root, port)
    atexit.register(bouncer.remove)
    _await_ready(bouncer)
    database = server.path or "/postgres"
    return f"postgresql://{login}@127.0.0.1:{port}{database}?xjobs_pooler={mode}"


def _config(root: Path, port: int, server: SplitResult, mode: PoolMode) -> str:
    return f"""\
[databases]
* = host={server.hostname or "127.0.0.1"} port={server.port or 5432}

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {port}
unix_socket_dir =
auth_type = trust
auth_file = {root / "users.txt"}
pool_mode = {mode}
default_pool_size = {SERVER_POOL_SIZE}
max_client_conn = 2000
server_login_retry = 1
ignore_startup_parameters = extra_float_digits
logfile = {root / "pgbouncer.log"}
pidfile = {root / "pgbouncer.pid"}
"""


def _await_ready(bouncer: _Bouncer) -> None:
    deadline = time.monotonic() + READY_S
    while time.monotonic() < deadline:
        if bouncer.proc.poll() is not None:
            log = bouncer.root / "pgbouncer.log"
            told = log.read_text(errors="replace") if log.exists() else ""
            bouncer.remove()
            raise ServerUnavailable(f"pgbouncer exited at start: {last_line(told)}")
        with (
            contextlib.suppress(OSError),
            socket.create_connection(("127.0.0.1", bouncer.port), timeout=1),
        ):
            return
        time.sleep(0.05)
    bouncer.remove()
    raise ServerUnavailable(f"pgbouncer did not listen on port {bouncer.port} in {READY_S} s")


def _unprivileged_user() -> pwd.struct_passwd | None:
    # pgbouncer refuses to run as root
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        try:
            return pwd.getpwnam(name)
        except KeyError:
            continue
    raise ServerUnavailable("running as root and neither a postgres nor a nobody user exists")
