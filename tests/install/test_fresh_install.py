"""The README's install lines, run for real: a fresh environment gets the library and the `xjobs` command.

Once per session every distribution is built (`uv build --all-packages`); then each `pip install`
line of the README's install block gets a new virtual environment of its own OUTSIDE the workspace
(`uv venv` with this interpreter), where the line is run as written — by `uv pip install`, with
`--find-links` to the built wheels (everything else comes from the package index) and
`--compile-bytecode`, as pip does by default. In those environments:

- `xjobs-kit` alone (no extra) brings the SQLite driver, and the README's quick start runs as
  printed on its SQLite file (`sqlite:///app.db`);
- `xjobs worker MODULE:APP`, the command `xjobs-kit` / `xjobs-kit[pg]` / `xjobs-kit[redis]`
  installs, runs a job enqueued before it started on a SQLite file / a real Postgres / Redis, then
  exits 0 on SIGTERM; on the file, a second worker process finds the job done (durable) and runs
  only the new one;
- after each line, the quick start runs on the line's durable backend with only its URL changed,
  as the README says; the library alone (`xjobs-core xjobs-pg`, `xjobs-core xjobs-redis`)
  installs no `xjobs` command, the kit does.

The servers are the test fixtures' throwaway ones (`xjobs_pg.servers`, `xjobs_redis.servers`):
each test works in a fresh schema / key prefix, dropped after. Without a server the test skips,
or fails under XJOBS_REQUIRE_SERVERS=1 (CI).
"""

from __future__ import annotations

import asyncio
import os
import re
import secrets
import shlex
import shutil
import signal
import subprocess
import sys
import time
import tomllib
import zipfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import asyncpg
import pytest
from redis.asyncio import Redis

from xjobs_pg.backend import asyncpg_dsn
from xjobs_pg.schema import quote_schema
from xjobs_pg.servers import ServerUnavailable, postgres_url, unavailable
from xjobs_redis.servers import ServerUnavailable as RedisUnavailable
from xjobs_redis.servers import redis_url
from xjobs_redis.testing import drop_prefix

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
KIT = "xjobs-kit"
STEP_TIMEOUT_S = 300
JOB_DONE_WITHIN_S = 30.0

# The app a fresh install's worker serves: one job that prints its input.
APP = """\
import asyncio
import os

from pydantic import BaseModel

import xjobs
from xjobs import JobContext, job


class Ping(BaseModel):
    n: int


@job(tenant="none", idempotency_key=lambda p: str(p.n))
async def ping(ctx: JobContext, input: Ping) -> None:
    print(f"ping {input.n}")


app = xjobs.App(backend=os.environ["XJOBS_INSTALL_URL"], jobs=[ping])


async def enqueue() -> None:
    async with app:
        print((await ping.enqueue(Ping(n=int(os.environ.get("XJOBS_INSTALL_N", "1"))))).job_id)


async def wait_for(job_id: str, within_s: float) -> None:
    async with app:
        deadline = asyncio.get_running_loop().time() + within_s
        while True:
            state = (await app.get_job(job_id)).state
            if state in {"completed", "failed", "dead", "cancelled"}:
                break
            if asyncio.get_running_loop().time() > deadline:
                break
            await asyncio.sleep(0.1)
        print(state)
"""


LIST_XJOBS_DISTRIBUTIONS = (
    "import importlib.metadata as m; "
    "print(*sorted(f'{d.name}=={d.version}' for d in m.distributions() if d.name.startswith('xjobs')))"
)


def _uv() -> str:
    found = os.environ.get("UV") or shutil.which("uv")
    if not found:
        pytest.fail("uv is not on PATH: the fresh install is made with `uv venv` and `uv pip`")
    return found


def _run(command: list[str], *, cwd: Path, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        command,
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=STEP_TIMEOUT_S,
        check=False,
    )
    assert done.returncode == 0, (
        f"{shlex.join(command)} exited {done.returncode}\n{done.stdout}\n{done.stderr}"
    )
    return done.stdout


def _readme_blocks(language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```", README.read_text(), flags=re.S | re.M)


def readme_install_lines() -> list[str]:
    """The `pip install …` lines of the README's ```sh blocks, comments dropped."""
    lines = []
    for block in _readme_blocks("sh"):
        for line in block.splitlines():
            words = shlex.split(line, comments=True)
            if words[:2] == ["pip", "install"]:
                lines.append(shlex.join(words))
    return lines


def readme_quick_start() -> str:
    section = README.read_text().split("## Quick start", 1)[1]
    found = re.search(r"^```python\n(.*?)^```", section, flags=re.S | re.M)
    assert found, "the README's quick start has no python block"
    return found.group(1)


def _install_line(requirement: str) -> str:
    """The README's install line that names `requirement` (exactly, as its first requirement)."""
    lines = [line for line in readme_install_lines() if shlex.split(line)[2] == requirement]
    assert lines, f"the README has no `pip install {requirement} …` line: {readme_install_lines()}"
    return lines[0]


def _clean_env(venv: Path, **extra: str) -> dict[str, str]:
    """This process's environment as a shell in `venv` would see it: no workspace leaks in."""
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in {"VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME", "UV_PROJECT_ENVIRONMENT"}
    }
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["VIRTUAL_ENV"] = str(venv)
    env["PYTHONUNBUFFERED"] = "1"
    return {**env, **extra}


def _workspace_versions() -> dict[str, str]:
    versions = {}
    for pyproject in (ROOT / "packages").glob("*/pyproject.toml"):
        project = tomllib.loads(pyproject.read_text())["project"]
        versions[project["name"]] = project["version"]
    return versions


@pytest.fixture(scope="session")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every workspace distribution, built once (sdist, then the wheel from it)."""
    out = tmp_path_factory.mktemp("dist")
    _run([_uv(), "build", "--all-packages", "--quiet", "-o", str(out)], cwd=ROOT)
    return out


@pytest.fixture(scope="session")
def installed(tmp_path_factory: pytest.TempPathFactory, dist: Path) -> Callable[[str], Path]:
    """`installed(line)`: a new venv outside the workspace where the README's `line` was run."""
    venvs: dict[str, Path] = {}

    def install(line: str) -> Path:
        if line in venvs:
            return venvs[line]
        where = tmp_path_factory.mktemp("venv")
        assert ROOT not in where.parents, f"{where} is inside the workspace"
        venv = where / "venv"
        _run([_uv(), "venv", "--quiet", "--python", sys.executable, str(venv)], cwd=where)
        words = shlex.split(line)
        assert words[:2] == ["pip", "install"], line
        # the README's line as a user types it, into this venv, the built wheels beside the index
        command = [_uv(), "pip", "install", "--quiet", "--compile-bytecode"]
        command += ["--python", str(venv / "bin" / "python")]
        _run([*command, "--find-links", str(dist), *words[2:]], cwd=where)
        # what was installed is what the workspace built, never a same-named project of the index
        found = _run(
            [str(venv / "bin" / "python"), "-c", LIST_XJOBS_DISTRIBUTIONS],
            cwd=where,
            env=_clean_env(venv),
        )
        versions = {
            name: version for name, _, version in (x.partition("==") for x in found.split())
        }
        workspace = _workspace_versions()
        assert versions, f"{line} installed no xjobs distribution"
        for name, version in versions.items():
            assert workspace.get(name) == version, (
                f"{line} installed {name}=={version}: {workspace}"
            )
        venvs[line] = venv
        return venv

    return install


QUICK_START_URL = 'backend="sqlite:///app.db"'


@contextmanager
def fresh_url(engine: str) -> Iterator[str]:
    """A URL on the engine's test server with a new `xjobs_schema` / `xjobs_prefix`, dropped after;
    for SQLite, a file in the working directory of the commands."""
    if engine == "sqlite":
        yield "sqlite:///app.db"
    elif engine == "postgres":
        try:
            server = postgres_url()
        except ServerUnavailable as exc:
            unavailable(f"no Postgres server for the fresh install test: {exc}")
        schema = f"xjobs_t_{secrets.token_hex(6)}"
        yield f"{server}{'&' if '?' in server else '?'}xjobs_schema={schema}"
        asyncio.run(_drop_schema(server, schema))
    else:
        try:
            server = redis_url()
        except RedisUnavailable as exc:
            unavailable(f"no Redis server for the fresh install test: {exc}")
        prefix = f"xjobs_t_{secrets.token_hex(6)}"  # the tests' prefix shape (TEST_PREFIX)
        yield f"{server}{'&' if '?' in server else '?'}xjobs_prefix={prefix}"
        asyncio.run(_drop_prefix(server, prefix))


async def _drop_schema(server: str, schema: str) -> None:
    conn = await asyncpg.connect(asyncpg_dsn(server)[0])
    try:
        await conn.execute(f"drop schema if exists {quote_schema(schema)} cascade")
    finally:
        await conn.close()


async def _drop_prefix(server: str, prefix: str) -> None:
    client = Redis.from_url(server, decode_responses=True)
    try:
        await drop_prefix(client, prefix)
    finally:
        await client.aclose()


def _run_quick_start(venv: Path, where: Path, url: str | None = None) -> str:
    source = readme_quick_start()
    if url is not None:
        assert source.count(QUICK_START_URL) == 1, "the quick start names its URL once"
        source = source.replace(QUICK_START_URL, f"backend={url!r}")
    script = where / "quick_start.py"
    script.write_text(source)
    return _run([str(venv / "bin" / "python"), str(script)], cwd=where, env=_clean_env(venv))


def test_the_readme_installs_the_kit_with_each_backend_and_the_library_alone() -> None:
    lines = readme_install_lines()
    for requirement in (KIT, f"{KIT}[pg]", f"{KIT}[redis]", "xjobs-core"):
        assert any(shlex.split(line)[2] == requirement for line in lines), lines


def test_the_kit_is_dependencies_only_and_never_shadows_import_xjobs(dist: Path) -> None:
    (wheel,) = dist.glob("xjobs_kit-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        shipped = [name for name in archive.namelist() if ".dist-info/" not in name]
    assert shipped == [], f"{wheel.name} ships files besides its metadata: {shipped}"


def test_the_quick_start_runs_as_printed_after_the_kit_install(
    installed: Callable[[str], Path], tmp_path: Path
) -> None:
    venv = installed(_install_line(f"{KIT}[pg]"))
    out = _run_quick_start(venv, tmp_path)
    assert "receipt for 42 (attempt 1)" in out, out
    assert "completed=1" in out, out
    where = _run(
        [str(venv / "bin" / "python"), "-c", "import xjobs; print(xjobs.__file__)"],
        cwd=tmp_path,
        env=_clean_env(venv),
    )
    assert Path(where.strip()).is_relative_to(venv), f"`import xjobs` found {where.strip()}"


def test_the_kit_alone_brings_the_sqlite_driver_and_runs_the_quick_start_on_a_file(
    installed: Callable[[str], Path], dist: Path, tmp_path: Path
) -> None:
    venv = installed(_install_line(KIT))
    (wheel,) = dist.glob("xjobs_kit-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        (metadata,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        requires = [
            line.split(":", 1)[1].strip()
            for line in archive.read(metadata).decode().splitlines()
            if line.startswith("Requires-Dist:") and "extra ==" not in line
        ]
    assert "xjobs-sqlite" in requires, requires
    found = _run(
        [str(venv / "bin" / "python"), "-c", LIST_XJOBS_DISTRIBUTIONS],
        cwd=tmp_path,
        env=_clean_env(venv),
    )
    names = {x.partition("==")[0] for x in found.split()}
    assert names == {"xjobs-core", "xjobs-cli", "xjobs-sqlite", "xjobs-kit"}, found

    out = _run_quick_start(venv, tmp_path)

    assert "receipt for 42 (attempt 1)" in out, out
    assert "completed=1" in out, out
    assert (tmp_path / "app.db").is_file()


@dataclass
class Served:
    """One `xjobs worker` process's run: the job's state while it ran, and how the process ended."""

    running: bool
    state: str
    out: str
    err: str
    returncode: int | None
    stop_s: float


def _serve_until_done(xjobs: Path, cwd: Path, env: dict[str, str], job_id: str) -> Served:
    """Start `xjobs worker install_app:app`, wait for `job_id` to finish, SIGTERM the worker."""
    python = str(Path(xjobs).with_name("python"))
    worker = subprocess.Popen(
        [str(xjobs), "worker", "install_app:app"],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        state = _run(
            [
                python,
                "-c",
                "import asyncio, install_app as a; "
                f"asyncio.run(a.wait_for({job_id!r}, {JOB_DONE_WITHIN_S}))",
            ],
            cwd=cwd,
            env=env,
        ).strip()
        running = worker.poll() is None
        worker.send_signal(signal.SIGTERM)
        sent = time.monotonic()
        out, err = worker.communicate(timeout=30)
        stopped = time.monotonic() - sent
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.communicate()
    return Served(running, state, out, err, worker.returncode, stopped)


def _check_served(served: Served, line: str) -> None:
    err = served.err
    assert served.running, f"the worker exited {served.returncode} before it was stopped:\n{err}"
    assert served.state == "completed", f"the job is {served.state}\n{err}"
    assert line in served.out, served.out
    assert served.returncode == 0, f"exit {served.returncode} after SIGTERM:\n{err}"
    assert served.stop_s < 30
    assert re.search(r"worker stopped:.*\bcompleted=1\b", err), err


@pytest.mark.parametrize(
    ("engine", "requirement"),
    [("sqlite", KIT), ("postgres", f"{KIT}[pg]"), ("redis", f"{KIT}[redis]")],
)
def test_the_installed_xjobs_worker_runs_a_job_then_exits_0_on_sigterm(
    installed: Callable[[str], Path], tmp_path: Path, engine: str, requirement: str
) -> None:
    venv = installed(_install_line(requirement))
    xjobs = venv / "bin" / "xjobs"
    assert xjobs.exists(), f"`pip install {requirement}` gave no xjobs command"
    (tmp_path / "install_app.py").write_text(APP)
    python = str(venv / "bin" / "python")
    with fresh_url(engine) as url:
        env = _clean_env(venv, XJOBS_INSTALL_URL=url)

        def enqueue(n: int) -> str:
            code = "import asyncio, install_app as a; asyncio.run(a.enqueue())"
            with_n = {**env, "XJOBS_INSTALL_N": str(n)}
            return _run([python, "-c", code], cwd=tmp_path, env=with_n).strip()

        first = enqueue(1)
        served = _serve_until_done(xjobs, tmp_path, env, first)
        _check_served(served, "ping 1")
        if engine != "sqlite":
            return
        # the file outlived the worker: a second worker process finds the job done, runs only
        # the one enqueued since
        again = _serve_until_done(xjobs, tmp_path, env, enqueue(2))
    _check_served(again, "ping 2")
    assert "ping 1" not in again.out, again.out
    done = _run(
        [python, "-c", f"import asyncio, install_app as a; asyncio.run(a.wait_for({first!r}, 0))"],
        cwd=tmp_path,
        env=env,
    )
    assert done.strip() == "completed"


@pytest.mark.parametrize(
    ("requirements", "engine", "command"),
    [
        ([f"{KIT}[pg]"], "postgres", True),
        ([f"{KIT}[redis]"], "redis", True),
        (["xjobs-core", "xjobs-pg"], "postgres", False),
        (["xjobs-core", "xjobs-redis"], "redis", False),
    ],
    ids=["kit-pg", "kit-redis", "library-pg", "library-redis"],
)
def test_the_quick_start_runs_on_a_durable_backend_by_changing_only_the_url(
    installed: Callable[[str], Path],
    tmp_path: Path,
    requirements: list[str],
    engine: str,
    command: bool,
) -> None:
    line = next((x for x in readme_install_lines() if shlex.split(x)[2:] == requirements), None)
    assert line, f"the README has no `pip install {' '.join(requirements)}` line"
    venv = installed(line)
    assert (venv / "bin" / "xjobs").exists() == command, (
        f"`{line}` should {'' if command else 'not '}install the xjobs command"
    )
    with fresh_url(engine) as url:
        out = _run_quick_start(venv, tmp_path, url)
    assert "receipt for 42 (attempt 1)" in out, out
    assert "completed=1" in out, out
