"""What every driver's test servers share: the first source that works, once per process, and the skip rule."""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Callable, Sequence
from typing import NoReturn

Source = tuple[str, Callable[[], str]]


class ServerUnavailable(RuntimeError):
    """No test server could be found or started; the message says why in one line."""


def unavailable(reason: str) -> NoReturn:
    """Skip the calling test for want of a server, or fail it when XJOBS_REQUIRE_SERVERS=1 (CI)."""
    import pytest

    if os.environ.get("XJOBS_REQUIRE_SERVERS") == "1":
        pytest.fail(reason)
    pytest.skip(reason)


class FirstServer:
    """Tries each source in order on the first `url()` and remembers the answer, success or failure."""

    def __init__(self, engine: str, sources: Sequence[Source]) -> None:
        self._engine = engine
        self._sources = tuple(sources)
        self.lock = threading.RLock()
        self._url: str | None = None
        self.source = ""
        self._failure: ServerUnavailable | None = None

    @property
    def found(self) -> bool:
        """Whether a source already answered with a server URL."""
        return self._url is not None

    def url(self) -> str:
        """The URL from the first source that works, or the remembered `ServerUnavailable`."""
        with self.lock:
            if self._url is not None:
                return self._url
            if self._failure is not None:
                raise self._failure
            reasons: list[str] = []
            for source, find in self._sources:
                try:
                    url = find()
                except ServerUnavailable as exc:
                    reasons.append(f"{source}: {exc}")
                    continue
                except Exception as exc:  # a third-party source failing is a reason, not a crash
                    reasons.append(f"{source}: {type(exc).__name__}: {' '.join(str(exc).split())}")
                    continue
                self._url, self.source = url, source
                return url
            self._failure = ServerUnavailable(
                f"no {self._engine} server for tests (" + "; ".join(reasons) + ")"
            )
            raise self._failure


def from_env(variable: str) -> str:
    """The URL in `variable`, or `ServerUnavailable` when it is not set."""
    url = os.environ.get(variable)
    if not url:
        raise ServerUnavailable(f"{variable} is not set")
    return url


def free_port() -> int:
    """A loopback TCP port no one listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def docker_answers(path: str = "/var/run/docker.sock") -> bool:
    """Whether a Docker engine answers `GET /_ping` on its socket."""
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


def last_line(text: str) -> str:
    """The last non-empty line of a tool's output, for a one-line reason."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else "no output"
