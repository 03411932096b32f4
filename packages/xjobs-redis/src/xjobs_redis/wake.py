"""The wake on Redis: one pub/sub subscription per backend, live only after a probe crossed it.

An enqueue of a due row publishes its queue name on the channel in the same pipelined round
trip; the worker's poll stays the guarantee, so a message lost to a reconnect costs latency only.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from collections.abc import Awaitable, Callable

from redis.asyncio import Redis

from xjobs.contract.backend import WakeSource
from xjobs_redis.client import Client

log = logging.getLogger("xjobs_redis.wake")

REDIAL_FLOOR_S = 0.1
REDIAL_CEILING_S = 5.0
PROBE_TIMEOUT_S = 5.0
CANCEL_AGAIN_S = 0.05
READ_TIMEOUT_S = 1.0  # a read that waits this long ends quietly; no command is sent while idle


class WakeSubscriber:
    """Holds the subscription and feeds `source`; every (re)subscription is proven by a probe.

    `dial` makes the subscription's own client, one that never retries: a connection redis-py
    re-dialled on its own would re-subscribe silently, with no re-scan for what the gap missed.
    """

    def __init__(
        self,
        client: Client,
        dial: Callable[[], Redis],
        channel: str,
        source: WakeSource,
        on_subscribed: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self._client = client
        self._dial = dial
        self._channel = channel
        self._source = source
        self._on_subscribed = on_subscribed
        self._task: asyncio.Task[None] | None = None
        self._closing = False

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.ensure_future(self._hold())

    async def _hold(self) -> None:
        delay = REDIAL_FLOOR_S
        while not self._closing:
            own = self._dial()
            pubsub = own.pubsub(ignore_subscribe_messages=True)
            try:
                await pubsub.subscribe(self._channel)
                probe = f"probe:{secrets.token_hex(8)}"
                await self._client.publish(self._channel, probe)
                # Rows enqueued while no one listened got no wake: every listener re-scans now.
                self._source.emit(None)
                if self._on_subscribed is not None:
                    await self._checked(self._on_subscribed)
                await self._listen(pubsub, probe)
                delay = REDIAL_FLOOR_S
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("jobs.wake.lost", extra={"error": repr(exc)})
            finally:
                self._source.set_live(False)
                with contextlib.suppress(Exception):
                    await pubsub.aclose()  # type: ignore[no-untyped-call]
                with contextlib.suppress(Exception):
                    await own.aclose()
            await asyncio.sleep(delay)
            delay = min(delay * 2, REDIAL_CEILING_S)

    async def _checked(self, hook: Callable[[], Awaitable[None]]) -> None:
        """Run the (re)subscription hook (the server's data-loss check); its failure only logs."""
        try:
            await hook()
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.warning("jobs.redis.health-check-failed", extra={"error": repr(exc)})

    async def _listen(self, pubsub: object, probe: str) -> None:
        """Read messages until the connection fails: the probe proves the wake, the rest wake."""
        loop = asyncio.get_running_loop()
        unproven_after = loop.time() + PROBE_TIMEOUT_S
        warned = False
        while not self._closing:
            message = await pubsub.get_message(  # type: ignore[attr-defined]
                ignore_subscribe_messages=True, timeout=READ_TIMEOUT_S
            )
            if message is None:
                if not self._source.live and not warned and loop.time() > unproven_after:
                    log.warning("jobs.wake.unproven", extra={"channel": self._channel})
                    warned = True
                continue
            data = str(message["data"])
            if data == probe:
                self._source.set_live(True)
            elif not data.startswith("probe:"):
                self._source.emit(data)

    async def close(self) -> None:
        self._closing = True
        task, self._task = self._task, None
        # redis-py can swallow a cancellation that lands while it dials: cancel until it ends
        while task is not None and not task.done():
            task.cancel()
            await asyncio.wait({task}, timeout=CANCEL_AGAIN_S)
        self._source.set_live(False)
