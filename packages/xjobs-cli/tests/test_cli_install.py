"""`xjobs install [--url URL] [--schema NAME]` runs the backend's one install point, idempotently.

The CLI depends on xjobs-core only; the Postgres cases import xjobs-pg (installed in the workspace
test environment) for the test server, and the driver is found through its entry point.
"""

from __future__ import annotations

import asyncio
import secrets
import socket
from collections.abc import Iterator
from dataclasses import dataclass

import asyncpg
import pytest

from xjobs_cli.main import main

# Tables the install must create (the driver's own tests pin its whole schema; it grows).
TABLES = [
    "attempt_errors",
    "counters",
    "event_waits",
    "events",
    "jobs",
    "leaders",
    "outbox",
    "pauses",
    "schema_version",
    "slots",
    "steps",
    "task_fires",
    "task_pauses",
    "task_watermarks",
    "workers",
]


@dataclass
class Target:
    url: str
    schema: str


def _server_url() -> str:
    servers = pytest.importorskip("xjobs_pg.servers")
    try:
        url: str = servers.postgres_url()
    except servers.ServerUnavailable as exc:
        servers.unavailable(f"no Postgres server for `xjobs install`: {exc}")
    return url


async def _tables(url: str, schema: str) -> list[str]:
    conn = await asyncpg.connect(url)
    try:
        rows = await conn.fetch(
            "select table_name from information_schema.tables where table_schema = $1 "
            "order by table_name",
            schema,
        )
    finally:
        await conn.close()
    return [row["table_name"] for row in rows]


async def _drop(url: str, schema: str) -> None:
    conn = await asyncpg.connect(url)
    try:
        await conn.execute(f'drop schema if exists "{schema}" cascade')
    finally:
        await conn.close()


@pytest.fixture
def target() -> Iterator[Target]:
    """The test server and a schema name no one has installed yet (dropped afterwards)."""
    url = _server_url()
    schema = f"xjobs_t_{secrets.token_hex(6)}"
    yield Target(url, schema)
    asyncio.run(_drop(url, schema))


def test_install_creates_the_tables_in_the_named_schema(
    target: Target, capsys: pytest.CaptureFixture[str]
) -> None:
    assert asyncio.run(_tables(target.url, target.schema)) == []

    code = main(["install", "--url", target.url, "--schema", target.schema])

    out = capsys.readouterr().out
    assert code == 0
    assert out.splitlines() == [f"postgres: installed schema {target.schema} at {target.url}"]
    assert set(TABLES) <= set(asyncio.run(_tables(target.url, target.schema)))


def test_install_twice_is_fine(target: Target, capsys: pytest.CaptureFixture[str]) -> None:
    first = main(["install", "--url", target.url, "--schema", target.schema])
    second = main(["install", "--url", target.url, "--schema", target.schema])

    assert (first, second) == (0, 0)
    assert len(capsys.readouterr().out.splitlines()) == 2
    assert set(TABLES) <= set(asyncio.run(_tables(target.url, target.schema)))


def test_install_reads_the_schema_from_the_url_query(
    target: Target, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"{target.url}{'&' if '?' in target.url else '?'}xjobs_schema={target.schema}"

    code = main(["install", "--url", url])

    assert code == 0
    assert capsys.readouterr().out.splitlines() == [f"postgres: installed {url}"]
    assert set(TABLES) <= set(asyncio.run(_tables(target.url, target.schema)))


def test_install_on_memory_succeeds_with_nothing_to_install(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = main(["install", "--url", "memory://"])

    assert code == 0
    assert capsys.readouterr().out.splitlines() == ["memory: nothing to install (memory://)"]


def test_install_of_an_unknown_scheme_exits_2_with_its_code(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = main(["install", "--url", "nosuchdb://host/x"])

    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("error: XJOBS_BACKEND_UNKNOWN: ")
    assert "Traceback" not in err


def test_install_into_an_invalid_schema_name_exits_2_with_its_code(
    target: Target, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["install", "--url", target.url, "--schema", "Not-A-Schema"])

    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("error: XJOBS_SCHEMA_INVALID: ")


def test_install_against_an_unreachable_server_exits_1_with_its_code(
    capsys: pytest.CaptureFixture[str],
) -> None:
    pytest.importorskip("xjobs_pg")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # free now, and nothing listens on it

    code = main(["install", "--url", f"postgresql://postgres@127.0.0.1:{port}/postgres"])

    err = capsys.readouterr().err
    assert code == 1  # the backend failed, not the input: retrying later may succeed
    assert err.startswith("error: XJOBS_BACKEND_UNAVAILABLE: ")
    assert "Traceback" not in err


def _with_password(url: str) -> str:
    """`url` carrying a password both ways a driver reads one: in the userinfo and `?password=`."""
    scheme, rest = url.split("://", 1)
    userinfo, at, host = rest.rpartition("@")
    user = userinfo.partition(":")[0] if at else "postgres"
    return f"{scheme}://{user}:hunter2@{host}{'&' if '?' in host else '?'}password=hunter2"


def test_install_never_prints_a_password(
    target: Target, capsys: pytest.CaptureFixture[str]
) -> None:
    url = _with_password(target.url)  # the test server trusts loopback: the password is ignored

    code = main(["install", "--url", url, "--schema", target.schema])

    out, err = capsys.readouterr()
    assert code == 0, err
    assert "hunter2" not in out + err
    assert ":***@" in out
    assert "password=***" in out


def test_install_reads_the_url_from_the_environment(
    target: Target, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XJOBS_URL", _with_password(target.url))

    code = main(["install", "--schema", target.schema])

    out = capsys.readouterr().out
    assert code == 0
    assert "hunter2" not in out
    assert set(TABLES) <= set(asyncio.run(_tables(target.url, target.schema)))


def test_install_without_a_url_names_both_ways_to_give_one(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("XJOBS_URL", raising=False)

    code = main(["install"])

    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("error: XJOBS_TARGET_INVALID: ")
    assert "--url" in err
    assert "XJOBS_URL" in err
