"""The plugin registry: loads `xjobs` entry points once, maps URL schemes to backend factories, opens backends."""

from __future__ import annotations

import logging
import os
import threading
from dataclasses import dataclass, field
from typing import Any, Final
from urllib.parse import urlsplit

import pluggy

from xjobs.clock import Clock, SystemClock
from xjobs.contract import hookspecs
from xjobs.contract.backend import Backend
from xjobs.contract.driver import DRIVER_API_VERSION
from xjobs.contract.factory import BackendFactory
from xjobs.errors import BackendConflictError, BackendUnknownError, DriverApiMismatchError

ENTRY_POINT_GROUP = "xjobs"
# The backend an App opens when it names none: durable, one file in the working directory, no
# server. `memory://` (a store that forgets at exit) is opened only when asked for.
DEFAULT_URL: Final = "sqlite:///xjobs.db"
# Where a URL scheme's driver comes from, for the refusal of a scheme no installed plugin opens.
DRIVER_DISTRIBUTIONS: Final = {
    "postgresql": "xjobs-pg",
    "postgres": "xjobs-pg",
    "redis": "xjobs-redis",
    "rediss": "xjobs-redis",
    "sqlite": "xjobs-sqlite",
}

log = logging.getLogger("xjobs.backend")
_told_default: set[str] = set()


@dataclass(frozen=True, slots=True)
class InstalledBackend:
    """A factory as the registry found it, with the distribution that provided it."""

    factory: BackendFactory
    distribution: str
    version: str


@dataclass
class _Registry:
    manager: pluggy.PluginManager
    by_scheme: dict[str, InstalledBackend] = field(default_factory=dict)
    by_name: dict[str, InstalledBackend] = field(default_factory=dict)


_lock = threading.Lock()
_registry: _Registry | None = None


def _distribution_of(manager: pluggy.PluginManager, plugin: object) -> tuple[str, str]:
    for registered, dist in manager.list_plugin_distinfo():
        if registered is plugin:
            return str(dist.metadata["name"]), str(dist.version)
    return getattr(plugin, "__name__", repr(plugin)), "unknown"


def _load() -> _Registry:
    manager = pluggy.PluginManager("xjobs")
    manager.add_hookspecs(hookspecs)
    if not os.environ.get("XJOBS_DISABLE_PLUGINS"):
        manager.load_setuptools_entrypoints(ENTRY_POINT_GROUP)
    manager.check_pending()
    registry = _Registry(manager=manager)
    for plugin in manager.get_plugins():
        impl = getattr(plugin, "xjobs_backends", None)
        if impl is None:
            continue
        dist, version = _distribution_of(manager, plugin)
        for factory in impl():
            _add(registry, InstalledBackend(factory=factory, distribution=dist, version=version))
    return registry


def _add(registry: _Registry, installed: InstalledBackend) -> None:
    factory = installed.factory
    if factory.name in registry.by_name:
        other = registry.by_name[factory.name]
        raise BackendConflictError(
            f"backend name {factory.name!r} is claimed by both {other.distribution} and "
            f"{installed.distribution}; uninstall one of them"
        )
    for scheme in factory.schemes:
        if scheme in registry.by_scheme:
            other = registry.by_scheme[scheme]
            raise BackendConflictError(
                f"URL scheme {scheme!r} is claimed by both {other.distribution} "
                f"({other.factory.name}) and {installed.distribution} ({factory.name}); "
                "uninstall one of them"
            )
        registry.by_scheme[scheme] = installed
    registry.by_name[factory.name] = installed


def registry() -> _Registry:
    """The loaded registry (entry points are read once per process)."""
    global _registry
    with _lock:
        if _registry is None:
            _registry = _load()
        return _registry


def reset_registry() -> None:
    """Forget the loaded plugins so the next lookup reads the entry points again (tests)."""
    global _registry
    with _lock:
        _registry = None


def installed_backends() -> list[InstalledBackend]:
    """Every installed backend factory, sorted by name."""
    return [registry().by_name[name] for name in sorted(registry().by_name)]


def _check_version(installed: InstalledBackend) -> None:
    if installed.factory.api_version != DRIVER_API_VERSION:
        raise DriverApiMismatchError(
            f"backend {installed.factory.name!r} from {installed.distribution} was built for driver "
            f"API {installed.factory.api_version}, this xjobs-core speaks {DRIVER_API_VERSION}; "
            "upgrade one of them"
        )


def factory_for_name(name: str) -> BackendFactory:
    """The factory registered under `name` (as `--xjobs-backend=NAME` names it)."""
    found = registry().by_name.get(name)
    if found is None:
        known = ", ".join(sorted(registry().by_name)) or "none"
        raise BackendUnknownError(f"no backend named {name!r} is installed; installed: {known}")
    _check_version(found)
    return found.factory


def factory_for_url(url: str) -> BackendFactory:
    """The factory whose schemes include the URL's scheme."""
    scheme = urlsplit(url).scheme.lower()
    found = registry().by_scheme.get(scheme)
    if found is None:
        known = ", ".join(
            f"{s}:// ({i.factory.name})" for s, i in sorted(registry().by_scheme.items())
        )
        remedy = DRIVER_DISTRIBUTIONS.get(scheme)
        hint = (
            f"pip install {remedy} (or xjobs-kit, which brings it) for {scheme}://"
            if remedy
            else "pip install xjobs-sqlite for sqlite://, xjobs-pg for postgresql://, "
            "xjobs-redis for redis://"
        )
        if url == DEFAULT_URL:
            hint += (
                f"; {DEFAULT_URL} is what an App opens when it names no backend: name one, "
                "e.g. App(backend='memory://') for a store that forgets at exit"
            )
        raise BackendUnknownError(
            f"no installed backend opens {scheme or url!r} URLs; installed: {known or 'none'} "
            f"({hint})"
        )
    _check_version(found)
    return found.factory


async def connect(url: str, *, clock: Clock | None = None, **options: Any) -> Backend:
    """Open a `Backend` for `url` through the plugin that owns its scheme."""
    factory = factory_for_url(url)
    if url == DEFAULT_URL:
        _tell_default()
    return await factory.open(url, clock=clock or SystemClock(), **options)


def _tell_default() -> None:
    """Say once per process and directory which file the default backend keeps the jobs in."""
    path = os.path.abspath(DEFAULT_URL.removeprefix("sqlite:///"))
    if path not in _told_default:
        _told_default.add(path)
        log.info("no backend named: jobs are kept in %s (%s)", path, DEFAULT_URL)
