"""Runs seen in another thread or process: a job body there reports its start to the bench process
over loopback UDP, and the CPU of the worker processes a peer starts is read from /proc."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import time
from collections.abc import AsyncIterator
from pathlib import Path

from bench.probe import probe

ENV = "XJOBS_BENCH_PROBE"  # host:port of the bench process's receiver, inherited by workers
RECEIVE_BUFFER = 16 * 1024 * 1024  # a burst of reports waits here while the loop is busy
SO_RCVBUFFORCE = 33  # Linux's; Python's socket module does not name it
_TICKS = os.sysconf("SC_CLK_TCK")


class _Receiver(asyncio.DatagramProtocol):
    def datagram_received(self, data: bytes, addr: tuple[str | object, int]) -> None:
        i, sent_at, started_at = data.split()
        probe.ran(int(i), float(sent_at), float(started_at))


@contextlib.asynccontextmanager
async def listening() -> AsyncIterator[None]:
    """Receive the reports of `ran` for the body; workers started inside it find the address in
    the environment."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:  # as root the buffer may pass net.core.rmem_max; else the kernel caps it
        sock.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, RECEIVE_BUFFER)
    except OSError:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RECEIVE_BUFFER)
    sock.bind(("127.0.0.1", 0))
    loop = asyncio.get_running_loop()
    transport, _ = await loop.create_datagram_endpoint(_Receiver, sock=sock)
    host, port = sock.getsockname()
    os.environ[ENV] = f"{host}:{port}"
    try:
        yield
    finally:
        os.environ.pop(ENV, None)
        transport.close()


_sender = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
_addresses: dict[str, tuple[str, int]] = {}


def ran(i: int, sent_at: float) -> None:
    """What a peer's job body calls in a worker thread or process: the job numbered `i`, enqueued
    at wall time `sent_at`, has started now (reported to the receiver listening at the time: each
    drain in a process listens on a port of its own)."""
    started_at = time.time()
    where = os.environ[ENV]
    address = _addresses.get(where)
    if address is None:
        host, _, port = where.partition(":")
        address = _addresses[where] = (host, int(port))
    _sender.sendto(f"{i} {sent_at!r} {started_at!r}".encode(), address)


def tree_cpu_s(pid: int) -> float:
    """CPU seconds (user and system) of process `pid` and every live descendant, and of the
    children each has waited for."""
    total, stack = 0.0, [pid]
    while stack:
        current = stack.pop()
        try:
            fields = Path(f"/proc/{current}/stat").read_text().rpartition(")")[2].split()
            tasks = list(Path(f"/proc/{current}/task").iterdir())
        except (FileNotFoundError, ProcessLookupError):
            continue  # it ended between the listing and the read
        # after the name: state is field 0, so utime, stime, cutime, cstime are 11-14
        total += sum(int(v) for v in fields[11:15]) / _TICKS
        for task in tasks:
            with contextlib.suppress(FileNotFoundError):
                stack += [int(p) for p in (task / "children").read_text().split()]
    return total
