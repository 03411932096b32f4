"""The fault suite's fixtures: a backend per scenario, the scene, and the `--report` writer.

The suite runs in its own session (`nox -s faults`), so `pytest tests` (the `tests` session)
leaves this folder out; name the folder or a file in it (`pytest tests/faults`), or set
`XJOBS_FAULTS=1`, to run it. `--report` (or `XJOBS_FAULTS_REPORT=1`) writes the ledger table of
the run into docs/reliability.md between its markers.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import AsyncIterator, Generator, Iterator
from pathlib import Path

import pytest
import pytest_asyncio
from redis.asyncio import Redis

from xjobs_pg.schema import quote_schema
from xjobs_pg.servers import ServerUnavailable, postgres_url, unavailable
from xjobs_pg.testing import DROP_SCHEMA, session
from xjobs_redis.testing import drop_prefix

from . import harness

HERE = Path(__file__).parent

ROOT = HERE.parent.parent
DOC = ROOT / "docs" / "reliability.md"
# The scenarios whose faults are a process's own (kill -9 or SIGSTOP of a worker or a scheduler,
# a body that blocks, hangs or allocates), so they run on a SQLite file too: per file, every
# scenario (`None`) or the named ones. The others restart, partition, load, freeze or configure a
# server, or skew one process's clock (a SQLite file has no clock of its own: every process
# reads its own, as on the memory backend).
ON_A_FILE: dict[str, frozenset[str] | None] = {
    "test_kill.py": None,
    "test_scheduler.py": None,
    "test_bodies.py": None,
    "test_sigstop.py": frozenset({"test_a_worker_frozen_past_its_lease_is_fenced_when_it_wakes"}),
}


def _asked_for(config: pytest.Config) -> bool:
    if os.environ.get("XJOBS_FAULTS") == "1":
        return True
    for arg in config.args:
        path = Path(arg.split("::")[0]).resolve()
        if path == HERE or HERE in path.parents:
            return True
    return False


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    if HERE in collection_path.parents and not _asked_for(config):
        return True  # run by `nox -s faults`, not by the `tests` session
    return None


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--report",
        action="store_true",
        default=False,
        help="write the fault ledger table of this run into docs/reliability.md",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "scenario(name): the fault scenario's name in the ledger")
    config.addinivalue_line(
        "markers", "redis_server(appendonly, appendfsync): the scenario's Redis configuration"
    )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
        outcome = "xfail" if hasattr(report, "wasxfail") else report.outcome
        for ledger in harness.BOOK:
            if ledger.nodeid == item.nodeid:
                ledger.outcome = outcome
    return report


# -- backends ----------------------------------------------------------------------------------


@pytest_asyncio.fixture
async def pg_target() -> AsyncIterator[harness.Target]:
    """A fresh schema on the session's Postgres server (dropped after)."""
    try:
        server = postgres_url()
    except ServerUnavailable as exc:
        unavailable(f"no Postgres server for the fault suite: {exc}")
    schema = f"xjobs_t_{secrets.token_hex(6)}"
    yield harness.Target("postgres", harness.with_option(server, f"xjobs_schema={schema}"))
    await harness.ensure_pg_up(server)
    async with session() as conn:
        await conn.execute(DROP_SCHEMA.format(schema=quote_schema(schema)))


@pytest_asyncio.fixture
async def redis_target(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[harness.Target]:
    """A redis-server of this scenario's own (AOF everysec, noeviction, unless the test's
    `redis_server` marker says otherwise), stopped after."""
    marker = request.node.get_closest_marker("redis_server")
    config = marker.kwargs if marker else {}
    try:
        server = harness.RedisServer(tmp_path / "redis", **config)
    except FileNotFoundError as exc:
        unavailable(f"no Redis server for the fault suite: {exc}")
    server.start()
    prefix = f"xjobs_t_{secrets.token_hex(6)}"
    try:
        yield harness.Target(
            "redis", harness.with_option(server.url, f"xjobs_prefix={prefix}"), server
        )
    finally:
        if server.proc is not None and server.proc.paused:
            server.proc.resume()
        if server.proc is not None and server.proc.alive:
            client = Redis.from_url(server.url)
            try:
                await drop_prefix(client, prefix)
            finally:
                await client.aclose()
        server.stop()


@pytest.fixture
def sqlite_target(tmp_path: Path) -> harness.Target:
    """A SQLite file in the scenario's folder, shared by its worker processes."""
    return harness.Target("sqlite", f"sqlite:///{tmp_path / 'faults.db'}")


TARGETS = {"postgres": "pg_target", "redis": "redis_target", "sqlite": "sqlite_target"}


@pytest.fixture(params=list(TARGETS))
def target(request: pytest.FixtureRequest) -> harness.Target:
    """The scenario's backend: Postgres, Redis, then a SQLite file (the files of `ON_A_FILE`)."""
    found: harness.Target = request.getfixturevalue(TARGETS[request.param])
    return found


def _needs_a_server(item: pytest.Item) -> bool:
    callspec = getattr(item, "callspec", None)
    if callspec is None or callspec.params.get("target") != "sqlite":
        return False
    if item.path.name not in ON_A_FILE:
        return True
    names = ON_A_FILE[item.path.name]
    return names is not None and getattr(item, "originalname", item.name) not in names


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Deselect the SQLite runs of the scenarios that fault a server (not skipped: not run)."""
    deselected = [item for item in items if _needs_a_server(item)]
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        items[:] = [item for item in items if not _needs_a_server(item)]


@pytest.fixture
def scene(
    request: pytest.FixtureRequest, target: harness.Target, tmp_path: Path
) -> Iterator[harness.Scene]:
    """The scenario on `target`: its processes are stopped by pid afterwards, whatever happened."""
    marker = request.node.get_closest_marker("scenario")
    name = marker.args[0] if marker else request.node.originalname
    scene = harness.Scene(name, target.engine, target.url, tmp_path)
    scene.ledger.nodeid = request.node.nodeid
    try:
        yield scene
    finally:
        for proc in scene.procs:
            if proc.paused:
                proc.resume()
        unclean = scene.close()
        scene.ledger.notes.extend(unclean)
    # after the faults, every process still standing drains and exits 0 on SIGTERM
    assert not unclean, f"processes that did not exit 0 on SIGTERM: {unclean}"


# -- the report --------------------------------------------------------------------------------

TABLE_START = "<!-- faults:ledger:start -->"
TABLE_END = "<!-- faults:ledger:end -->"
HOSTILE_START = "<!-- faults:hostile:start -->"
HOSTILE_END = "<!-- faults:hostile:end -->"
FIGURES_START = "<!-- faults:figures:start -->"
FIGURES_END = "<!-- faults:figures:end -->"


def _ledger_table() -> str:
    head = (
        "| Scenario | Backend | Acknowledged | Completed | Buried | Lost | Duplicated (explained) "
        "| Stuck | Recovery s | Result |\n"
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---|\n"
    )
    rows = []
    for ledger in harness.BOOK:
        if not ledger.acknowledged and not ledger.outcome:
            continue
        recovery = "-" if ledger.recovery_s is None else f"{ledger.recovery_s:.1f}"
        rows.append(
            f"| {ledger.scenario} | {ledger.backend} | {ledger.acknowledged} | {ledger.completed} "
            f"| {ledger.buried} | {ledger.lost} | {ledger.duplicated} ({ledger.explained}) "
            f"| {ledger.stuck} | {recovery} | {ledger.outcome or 'not run'} |"
        )
    return head + "\n".join(rows) + "\n"


def _hostile_table() -> str:
    backends = ("memory", "postgres", "redis", "sqlite")
    cases = list(dict.fromkeys(case for case, _ in harness.HOSTILE))
    head = "| Input | " + " | ".join(backends) + " |\n|---|" + "---|" * len(backends) + "\n"
    rows = [
        f"| {case} | " + " | ".join(harness.HOSTILE.get((case, b), "-") for b in backends) + " |"
        for case in cases
    ]
    return head + "\n".join(rows) + "\n"


def _figures_table() -> str:
    head = "| Measurement | Figure |\n|---|---|\n"
    return head + "\n".join(f"| {what} | {figure} |" for what, figure in harness.FIGURES.items())


def _replace(text: str, start: str, end: str, body: str) -> str:
    before, rest = text.split(start, 1)
    _, after = rest.split(end, 1)
    return f"{before}{start}\n{body}{end}{after}"


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    wanted = session.config.getoption("--report", default=False) or (
        os.environ.get("XJOBS_FAULTS_REPORT") == "1"
    )
    if not wanted or not (harness.BOOK or harness.HOSTILE or harness.FIGURES):
        return
    text = DOC.read_text()
    if harness.BOOK:
        text = _replace(text, TABLE_START, TABLE_END, _ledger_table())
    if harness.HOSTILE:
        text = _replace(text, HOSTILE_START, HOSTILE_END, _hostile_table())
    if harness.FIGURES:
        text = _replace(text, FIGURES_START, FIGURES_END, _figures_table() + "\n")
    DOC.write_text(text)
