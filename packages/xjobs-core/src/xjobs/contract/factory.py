"""`BackendFactory`, the record a driver's `xjobs_backends` hook answers: how it opens backends
from a URL, and how the parity suite gets a fresh one for a test."""

from __future__ import annotations

import importlib
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass

from xjobs.clock import Clock
from xjobs.contract.backend import Backend
from xjobs.contract.driver import DRIVER_API_VERSION
from xjobs.errors import BackendUnknownError

OpenBackend = Callable[..., Awaitable[Backend]]
TestBackend = Callable[[Clock], AbstractAsyncContextManager[Backend]]


@dataclass(frozen=True, slots=True)
class BackendFactory:
    """How one driver opens backends: its name, URL schemes, contract version, and test backends."""

    name: str
    schemes: tuple[str, ...]
    open: OpenBackend
    test_backend: str
    api_version: int = DRIVER_API_VERSION
    description: str = ""

    def open_test_backend(self, clock: Clock) -> AbstractAsyncContextManager[Backend]:
        """A fresh, isolated backend for one test; `test_backend` ("module:attr") is imported only here.

        Production never loads test scaffolding: a plugin names its test backend by a string, so
        `connect()` and the entry points import no server fixtures.
        """
        module_name, _, attr = self.test_backend.partition(":")
        if not module_name or not attr:
            raise BackendUnknownError(
                f"backend {self.name!r} names its test backend {self.test_backend!r}; "
                "expected 'module:attr'"
            )
        found: TestBackend = getattr(importlib.import_module(module_name), attr)
        return found(clock)
