"""A loopback TCP fault proxy between xjobs and a real server: delay, stall, drop and cut, switched
at run time from the test's thread; optionally only on connections whose client sent a pattern."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, Literal, TypeVar
from urllib.parse import urlsplit, urlunsplit

Mode = Literal["pass", "delay", "stall", "drop"]
Direction = Literal["both", "to_server", "to_client"]
T = TypeVar("T")
CHUNK = 65536
HEAD_BYTES = 65536
CALL_TIMEOUT_S = 10.0


class _Link:
    """One proxied connection: the client's side, the server's side once dialled."""

    def __init__(self, client: asyncio.StreamWriter) -> None:
        self.client = client
        self.server: asyncio.StreamWriter | None = None
        self.head = b""  # the first HEAD_BYTES the client sent: what `only=` patterns match
        self.tainted = False  # it lived through a drop: its streams lost bytes

    def abort(self) -> None:
        """Cut both sides at once (a reset, not a close)."""
        for writer in (self.client, self.server):
            if writer is not None:
                writer.transport.abort()


class FaultProxy:
    """A loopback TCP proxy, in a thread of its own, in front of `host:port`.

    Modes (`set`), for the chosen direction and, with `only=`, only the connections whose client
    sent that byte pattern in its first `HEAD_BYTES` (`b"LISTEN"`: a Postgres wake connection):

    - `pass`: bytes flow.
    - `delay`: every chunk is held `delay_s` before it is forwarded, in order.
    - `stall`: bytes are held, not lost, and delivered in order on the heal; a connection opened
      meanwhile is accepted and dialled only then (it sees silence, never an error).
    - `drop`: bytes are discarded; a connection opened meanwhile is accepted and black-holed. On
      the heal, every connection that lived through the drop is cut (its streams lost bytes).

    `cut()` resets every open connection at once, whatever the mode.
    """

    def __init__(self, host: str, port: int) -> None:
        self.target = (host, port)
        self.port = 0
        self._mode: Mode = "pass"
        self._direction: Direction = "both"
        self._delay_s = 0.0
        self._only: bytes | None = None
        self._links: set[_Link] = set()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._healed = asyncio.Event()
        self._server: asyncio.Server | None = None

    def __enter__(self) -> FaultProxy:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> int:
        """Listen on a free loopback port; answers it."""
        self._thread.start()
        self._call(self._listen())
        return self.port

    def set(
        self,
        mode: Mode,
        *,
        delay_s: float = 0.0,
        direction: Direction = "both",
        only: bytes | None = None,
    ) -> None:
        """Switch the fault (from the test's thread); `pass` heals every connection."""
        self._call(self._switch(mode, delay_s, direction, only))

    def url(self, url: str) -> str:
        """`url` with its host and port replaced by the proxy's (clients dial the proxy)."""
        parts = urlsplit(url)
        netloc = parts.netloc.rpartition("@")[0]
        netloc = f"{netloc}@" if netloc else ""
        return urlunsplit(parts._replace(netloc=f"{netloc}127.0.0.1:{self.port}"))

    def open_links(self, only: bytes | None = None) -> int:
        """How many connections are open (whose client sent `only`, when given)."""
        return self._call(self._count(only))

    def cut(self) -> int:
        """Reset every open connection now; answers how many were cut."""
        return self._call(self._cut())

    def close(self) -> None:
        """Stop listening, cut every connection, end the thread."""
        self._call(self._shutdown())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=CALL_TIMEOUT_S)
        self._loop.close()

    def _call(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout=CALL_TIMEOUT_S)

    async def _listen(self) -> None:
        self._healed.set()
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _switch(
        self, mode: Mode, delay_s: float, direction: Direction, only: bytes | None
    ) -> None:
        if mode == "pass":
            for link in [link for link in self._links if link.tainted]:
                link.abort()
                self._links.discard(link)
        self._mode, self._delay_s, self._direction, self._only = mode, delay_s, direction, only
        if mode == "drop":
            for link in self._links:
                link.tainted = link.tainted or self._struck(link, "both")
        if mode == "stall":
            self._healed.clear()
        else:
            self._healed.set()

    async def _count(self, only: bytes | None) -> int:
        return sum(1 for link in self._links if only is None or only in link.head)

    async def _cut(self) -> int:
        cut = len(self._links)
        for link in list(self._links):
            link.abort()
        self._links.clear()
        return cut

    async def _shutdown(self) -> None:
        if self._server is not None:
            self._server.close()
        await self._cut()
        serving = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in serving:
            task.cancel()
        await asyncio.gather(*serving, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()
        await asyncio.sleep(0)  # the aborted transports close on the next turn of the loop

    def _struck(self, link: _Link, way: Direction) -> bool:
        """Whether the current fault applies to `link`'s bytes going `way`."""
        if self._only is not None and self._only not in link.head:
            return False
        return self._direction == "both" or way == "both" or self._direction == way

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        link = _Link(writer)
        self._links.add(link)
        try:
            if self._mode == "drop" and self._only is None:
                link.tainted = True
                while await reader.read(CHUNK):
                    pass  # black-holed until the heal cuts it
                return
            if self._only is None and self._direction != "to_client":
                await self._healed.wait()  # a stalled server answers no new connection
            server_reader, link.server = await asyncio.open_connection(*self.target)
            await asyncio.gather(
                self._pump(reader, link.server, link, "to_server"),
                self._pump(server_reader, writer, link, "to_client"),
            )
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            link.abort()
            self._links.discard(link)

    async def _pump(
        self, source: asyncio.StreamReader, sink: asyncio.StreamWriter, link: _Link, way: Direction
    ) -> None:
        try:
            while data := await source.read(CHUNK):
                if way == "to_server" and len(link.head) < HEAD_BYTES:
                    link.head = (link.head + data)[:HEAD_BYTES]
                while self._mode == "stall" and self._struck(link, way):
                    await self._healed.wait()
                if link.tainted or (self._mode == "drop" and self._struck(link, way)):
                    link.tainted = True
                    continue  # lost
                if self._mode == "delay" and self._struck(link, way):
                    await asyncio.sleep(self._delay_s)
                sink.write(data)
                await sink.drain()
        finally:
            link.abort()
