"""An action's body is bounded: a declared Content-Length over the cap is refused with 413 before a
byte of it is read, and a chunked body (no length) is cut off at the cap, so a client cannot make
the dashboard buffer what it sends."""

from __future__ import annotations

import base64
import socket
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from xjobs_web import basic_auth
from xjobs_web.guard import MAX_FORM_BYTES

if TYPE_CHECKING:
    from conftest import Serve, Served

AUTH = "Basic " + base64.b64encode(b"ops:pw").decode()


@pytest.fixture(scope="module")
def guarded(serve: Serve) -> Iterator[Served]:
    with serve("memory", auth=basic_auth("ops", "pw")) as s:
        yield s


def _head(s: Served, framing: str) -> bytes:
    lines = [
        "POST /act HTTP/1.1",
        f"Host: 127.0.0.1:{s.port}",
        f"Authorization: {AUTH}",
        "Content-Type: application/x-www-form-urlencoded",
        framing,
        "",
        "",
    ]
    return "\r\n".join(lines).encode()


def _status(conn: socket.socket) -> str:
    """The status line of the answer (the test fails by timeout if none comes)."""
    answer = b""
    while b"\r\n" not in answer:
        chunk = conn.recv(4096)
        if not chunk:
            break
        answer += chunk
    return answer.split(b"\r\n", 1)[0].decode()


def test_a_declared_length_over_the_cap_is_refused_before_the_body_is_sent(
    guarded: Served,
) -> None:
    with socket.create_connection(("127.0.0.1", guarded.port), timeout=10) as conn:
        conn.sendall(_head(guarded, f"Content-Length: {100 * MAX_FORM_BYTES}"))
        assert _status(conn) == "HTTP/1.1 413 Request Entity Too Large"


def test_a_chunked_body_without_a_length_is_cut_off_at_the_cap(guarded: Served) -> None:
    with socket.create_connection(("127.0.0.1", guarded.port), timeout=10) as conn:
        conn.sendall(_head(guarded, "Transfer-Encoding: chunked"))
        chunk = b"a" * 16384
        for _ in range(MAX_FORM_BYTES // len(chunk) + 2):  # past the cap; never the last chunk
            conn.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
        assert _status(conn) == "HTTP/1.1 413 Request Entity Too Large"
