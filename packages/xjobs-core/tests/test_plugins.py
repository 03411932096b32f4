"""Backends are found through the `xjobs` entry-point group, the memory backend included (plugins.py)."""

from __future__ import annotations

import sys
import textwrap
from importlib.metadata import entry_points
from pathlib import Path

import pluggy
import pytest

import xjobs
from xjobs.contract import plugins
from xjobs.contract.backend import Backend
from xjobs.contract.driver import DRIVER_API_VERSION
from xjobs.errors import BackendConflictError, BackendUnknownError, DriverApiMismatchError

# The `fresh_plugins` fixture (conftest.py) forgets these modules after each test.
FAKE_PLUGIN_PREFIX = "fake_xjobs_plugin"

pytestmark = pytest.mark.usefixtures("fresh_plugins")


def write_distribution(
    root: Path, *, dist: str, module: str, body: str, version: str = "0.1"
) -> None:
    """A throwaway installed distribution: a dist-info with an `xjobs` entry point, and its module."""
    info = root / f"{dist}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
    (info / "entry_points.txt").write_text(f"[xjobs]\nfake = {module}\n")
    (root / f"{module}.py").write_text(textwrap.dedent(body))


def factory_module(
    *, name: str, schemes: tuple[str, ...], api_version: str = "DRIVER_API_VERSION"
) -> str:
    """The source of a plugin module whose one hook answers one backend factory."""
    return f"""
        from contextlib import asynccontextmanager

        import xjobs
        from xjobs.contract.driver import DRIVER_API_VERSION
        from xjobs.contract.factory import BackendFactory


        async def open_backend(url, *, clock=None, **options):
            raise AssertionError("a test plugin is never opened")


        @asynccontextmanager
        async def test_backend(clock):
            raise AssertionError("a test plugin is never opened")
            yield


        @xjobs.hookimpl
        def xjobs_backends():
            return [
                BackendFactory(
                    name={name!r},
                    schemes={schemes!r},
                    open=open_backend,
                    test_backend=__name__ + ":test_backend",
                    api_version={api_version},
                )
            ]
    """


def install_fake(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, *, dist: str, suffix: str, body: str
) -> str:
    module = f"{FAKE_PLUGIN_PREFIX}_{suffix}"
    write_distribution(tmp_path, dist=dist, module=module, body=body)
    monkeypatch.syspath_prepend(str(tmp_path))
    plugins.reset_registry()
    return module


# -- the memory backend through its entry point ----------------------------------------------


def test_the_memory_backend_is_installed_by_xjobs_core() -> None:
    installed = {b.factory.name: b for b in xjobs.installed_backends()}
    assert "memory" in installed
    memory = installed["memory"]
    assert memory.distribution == "xjobs-core"
    assert memory.version == xjobs.__version__
    assert memory.factory.schemes == ("memory",)
    assert memory.factory.api_version == DRIVER_API_VERSION


def test_the_memory_backend_is_declared_in_the_xjobs_entry_point_group() -> None:
    (point,) = [ep for ep in entry_points(group="xjobs") if ep.name == "memory"]
    assert point.value == "xjobs.memory.plugin"
    assert point.dist is not None
    assert point.dist.name == "xjobs-core"


def test_the_memory_plugin_module_was_loaded_from_its_entry_point() -> None:
    (point,) = [ep for ep in entry_points(group="xjobs") if ep.name == "memory"]
    manager = plugins.registry().manager
    loaded = manager.get_plugin("memory")
    assert loaded is point.load()
    assert loaded is sys.modules["xjobs.memory.plugin"]
    distributions = {plugin: dist for plugin, dist in manager.list_plugin_distinfo()}
    assert distributions[loaded].metadata["name"] == "xjobs-core"
    (memory,) = [b for b in xjobs.installed_backends() if b.factory.name == "memory"]
    assert memory.factory.open.__module__ == point.value


def test_installed_backends_are_sorted_by_name(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    install_fake(
        monkeypatch,
        tmp_path,
        dist="fakedist",
        suffix="sorted",
        body=factory_module(name="aardvark", schemes=("aardvark",)),
    )
    names = [b.factory.name for b in xjobs.installed_backends()]
    assert names == sorted(names)
    assert {"aardvark", "memory"} <= set(names)


@pytest.mark.asyncio
async def test_connect_memory_opens_a_memory_backend() -> None:
    backend = await xjobs.connect("memory://")
    try:
        assert isinstance(backend, Backend)
        assert backend.name == "memory"
        assert "jobs" in backend.capabilities
    finally:
        await backend.close()


@pytest.mark.asyncio
async def test_a_url_scheme_is_matched_case_insensitively() -> None:
    backend = await xjobs.connect("MEMORY://")
    try:
        assert backend.name == "memory"
    finally:
        await backend.close()


@pytest.mark.asyncio
async def test_a_named_memory_url_is_one_store_per_name() -> None:
    first = await xjobs.connect("memory://test-plugins-shared")
    again = await xjobs.connect("memory://test-plugins-shared")
    fresh = await xjobs.connect("memory://")
    try:
        assert first is again
        assert fresh is not first
    finally:
        await fresh.close()


def test_a_backend_is_found_by_name() -> None:
    assert plugins.factory_for_name("memory").name == "memory"


# -- unknown schemes -------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_an_unknown_scheme_is_refused_listing_the_installed_ones() -> None:
    with pytest.raises(BackendUnknownError) as caught:
        await xjobs.connect("nosuchdb://localhost/app")
    assert caught.value.code == "XJOBS_BACKEND_UNKNOWN"
    assert "nosuchdb" in caught.value.message
    assert "memory://" in caught.value.message


@pytest.mark.asyncio
async def test_a_url_without_a_scheme_is_refused() -> None:
    with pytest.raises(BackendUnknownError) as caught:
        await xjobs.connect("localhost/app")
    assert caught.value.code == "XJOBS_BACKEND_UNKNOWN"


def test_an_unknown_backend_name_is_refused_listing_the_installed_ones() -> None:
    with pytest.raises(BackendUnknownError) as caught:
        plugins.factory_for_name("nosuchdb")
    assert caught.value.code == "XJOBS_BACKEND_UNKNOWN"
    assert "nosuchdb" in caught.value.message
    assert "memory" in caught.value.message


@pytest.mark.asyncio
async def test_disabling_plugins_makes_even_memory_unknown(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XJOBS_DISABLE_PLUGINS", "1")
    plugins.reset_registry()
    assert xjobs.installed_backends() == []
    with pytest.raises(BackendUnknownError) as caught:
        await xjobs.connect("memory://")
    assert caught.value.code == "XJOBS_BACKEND_UNKNOWN"
    assert "memory" in caught.value.message
    assert "none" in caught.value.message


def test_the_registry_is_read_once_until_reset(monkeypatch: pytest.MonkeyPatch) -> None:
    loaded = plugins.registry()
    monkeypatch.setenv("XJOBS_DISABLE_PLUGINS", "1")
    assert plugins.registry() is loaded  # entry points are read once per process
    plugins.reset_registry()
    assert plugins.registry() is not loaded
    assert plugins.registry().by_scheme == {}


# -- throwaway distributions -----------------------------------------------------------------


def test_two_plugins_claiming_one_scheme_conflict_at_load_naming_both_distributions(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    install_fake(
        monkeypatch,
        tmp_path,
        dist="fakedist",
        suffix="conflict",
        body=factory_module(name="fake", schemes=("memory",)),
    )
    with pytest.raises(BackendConflictError) as caught:
        xjobs.installed_backends()
    assert caught.value.code == "XJOBS_BACKEND_CONFLICT"
    assert "'memory'" in caught.value.message
    assert "fakedist" in caught.value.message
    assert "xjobs-core" in caught.value.message


def test_two_plugins_claiming_one_backend_name_conflict_at_load(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    install_fake(
        monkeypatch,
        tmp_path,
        dist="fakedist",
        suffix="samename",
        body=factory_module(name="memory", schemes=("other",)),
    )
    with pytest.raises(BackendConflictError) as caught:
        xjobs.installed_backends()
    assert caught.value.code == "XJOBS_BACKEND_CONFLICT"
    assert "fakedist" in caught.value.message
    assert "xjobs-core" in caught.value.message


@pytest.mark.asyncio
async def test_a_conflict_is_raised_by_connect_too(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    install_fake(
        monkeypatch,
        tmp_path,
        dist="fakedist",
        suffix="connect",
        body=factory_module(name="fake", schemes=("memory",)),
    )
    with pytest.raises(BackendConflictError) as caught:
        await xjobs.connect("memory://")
    assert caught.value.code == "XJOBS_BACKEND_CONFLICT"


def test_a_third_party_plugin_is_found_through_its_entry_point(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    install_fake(
        monkeypatch,
        tmp_path,
        dist="fakedist",
        suffix="found",
        body=factory_module(name="fake", schemes=("fake", "fakes")),
    )
    installed = {b.factory.name: b for b in xjobs.installed_backends()}
    assert installed["fake"].distribution == "fakedist"
    assert installed["fake"].version == "0.1"
    assert plugins.factory_for_url("fakes://host").name == "fake"


@pytest.mark.asyncio
async def test_a_plugin_built_for_another_driver_api_is_refused_by_connect(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    install_fake(
        monkeypatch,
        tmp_path,
        dist="olddist",
        suffix="api",
        body=factory_module(name="olddb", schemes=("olddb",), api_version="DRIVER_API_VERSION + 1"),
    )
    with pytest.raises(DriverApiMismatchError) as caught:
        await xjobs.connect("olddb://localhost")
    assert caught.value.code == "XJOBS_DRIVER_API_MISMATCH"
    assert "olddb" in caught.value.message
    assert "olddist" in caught.value.message
    assert str(DRIVER_API_VERSION) in caught.value.message
    assert str(DRIVER_API_VERSION + 1) in caught.value.message


def test_a_plugin_built_for_another_driver_api_is_refused_by_name(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    install_fake(
        monkeypatch,
        tmp_path,
        dist="olddist",
        suffix="apiname",
        body=factory_module(name="olddb", schemes=("olddb",), api_version="0"),
    )
    with pytest.raises(DriverApiMismatchError) as caught:
        plugins.factory_for_name("olddb")
    assert caught.value.code == "XJOBS_DRIVER_API_MISMATCH"


@pytest.mark.asyncio
async def test_a_mismatched_plugin_does_not_stop_the_others(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    install_fake(
        monkeypatch,
        tmp_path,
        dist="olddist",
        suffix="others",
        body=factory_module(name="olddb", schemes=("olddb",), api_version="0"),
    )
    backend = await xjobs.connect("memory://")
    try:
        assert backend.name == "memory"
    finally:
        await backend.close()


def test_a_misspelled_hook_fails_loudly_at_load(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    body = """
        import xjobs


        @xjobs.hookimpl
        def xjobs_backend():
            return []
    """
    install_fake(monkeypatch, tmp_path, dist="typodist", suffix="typo", body=body)
    with pytest.raises(pluggy.PluginValidationError) as caught:
        xjobs.installed_backends()
    assert "xjobs_backend" in str(caught.value)


def test_the_real_registry_is_back_after_a_fake_one() -> None:
    # Runs after the throwaway-distribution tests: their plugins must not outlive them.
    names = {b.factory.name for b in xjobs.installed_backends()}
    assert "fake" not in names
    assert "olddb" not in names
    assert "memory" in names
