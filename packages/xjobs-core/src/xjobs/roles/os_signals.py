"""SIGTERM/SIGINT for a long-running role: the first signal starts its drain, a second one cuts it short."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Callable, Iterator

log = logging.getLogger("xjobs.app")


@contextlib.contextmanager
def on_shutdown_signals(
    *, first: Callable[[], None], again: Callable[[], None], log_event: str, role_id: str
) -> Iterator[None]:
    """While inside, the first SIGTERM/SIGINT calls `first` (logged as `log_event`), later ones `again`."""
    loop = asyncio.get_running_loop()
    signals = (signal.SIGTERM, signal.SIGINT)
    seen = False

    def on_signal(signum: int) -> None:
        nonlocal seen
        if not seen:
            seen = True
            log.info(log_event, extra={"role_id": role_id, "signal": signum})
            first()
        else:
            again()

    for signum in signals:
        loop.add_signal_handler(signum, on_signal, signum)
    try:
        yield
    finally:
        for signum in signals:
            loop.remove_signal_handler(signum)
