"""Every check of the repository: `uv run nox` runs lint, the import layers, typecheck, tests and parity on every driver."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
import tomllib
from importlib.metadata import entry_points
from pathlib import Path

import nox

ROOT = Path(__file__).parent
nox.options.default_venv_backend = "uv"
nox.options.sessions = [
    "lint",
    "imports",
    "typecheck",
    "tests",
    "tests-cross",
    "tests-311",
    "parity",
    "parity-pgbouncer",
    "parity-sqlite-apsw",
    "parity-redis-cluster",
    "parity-redis-floor",
    "faults",
    "faults-failover",
    "docs",
]
nox.options.reuse_venv = "yes"

PACKAGE_SOURCES = sorted(str(p) for p in (ROOT / "packages").glob("*/src"))
TYPED_TEST_DIRS = [
    *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "packages").glob("*/tests")),
    # each folder of tests/ on its own (several hold a conftest.py), then its loose files
    *sorted(
        str(p.relative_to(ROOT))
        for p in (ROOT / "tests").iterdir()
        if p.is_dir() and p.name != "__pycache__"
    ),
    *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "tests").glob("*.py")),
    "bench",
    "examples",
]


def _drivers() -> dict[str, str]:
    """Installed drivers found through the `xjobs` entry point group: backend name -> distribution."""
    found: dict[str, str] = {}
    for ep in entry_points(group="xjobs"):
        dist = ep.dist.name if ep.dist is not None else "xjobs-core"
        found[ep.name] = dist
    return dict(sorted(found.items()))


def _locked(name: str) -> str:
    """`name==version` as uv.lock pins it, so a parity venv gets the tested test dependencies."""
    lock = tomllib.loads((ROOT / "uv.lock").read_text())
    for package in lock["package"]:
        if package["name"] == name:
            return f"{name}=={package['version']}"
    raise RuntimeError(f"{name} is not in uv.lock")


def _sync(session: nox.Session, *args: str) -> None:
    """Install from uv.lock into this session's venv (never the workspace's own .venv)."""
    env = {"UV_PROJECT_ENVIRONMENT": session.virtualenv.location}
    session.run_install("uv", "sync", "--locked", *args, env=env, external=True)


def _pytest(session: nox.Session, *args: str) -> None:
    """Run pytest; exit code 5 (nothing collected) is a failure, never a pass."""
    session.run("python", "-m", "pytest", *args, *session.posargs)


@nox.session
def lint(session: nox.Session) -> None:
    """ruff check and ruff format --check over the whole repository."""
    session.install(_locked("ruff"))
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")


@nox.session
def imports(session: nox.Session) -> None:
    """The layers of `.importlinter`: core's wings, every distribution above core, no driver
    importing another, the dashboard below the command line (tests/test_import_layers.py plants
    a violation of each and sees it fail)."""
    _sync(session, "--all-packages", "--group", "dev")
    session.run("lint-imports", "--no-cache")


@nox.session
def typecheck(session: nox.Session) -> None:
    """mypy --strict over every package's src/, then over each test directory and the benchmark."""
    _sync(session, "--all-packages", "--group", "dev")
    session.run("mypy", "--strict", *PACKAGE_SOURCES)
    # One run per directory: each holds a top-level `conftest.py`, and in one run they would
    # clash as duplicate modules. Every run is made, so one report lists every directory's errors.
    failed: list[str] = []
    for directory in TYPED_TEST_DIRS:
        try:
            session.run("mypy", "--strict", directory)
        except nox.command.CommandFailed:
            failed.append(directory)
    if failed:
        session.error(f"mypy --strict found errors in {', '.join(failed)}")


@nox.session
def tests(session: nox.Session) -> None:
    """Unit tests of every package (the cross-package tests are `tests-cross`, the fault suite
    `faults`: CI runs them side by side)."""
    _sync(session, "--all-packages", "--group", "dev")
    packages = sorted(str(p) for p in (ROOT / "packages").glob("*/tests"))
    _pytest(session, *packages)


@nox.session(name="tests-cross")
def tests_cross(session: nox.Session) -> None:
    """The cross-package end-to-end, install, telemetry and docs tests (tests/, less the fault
    suite)."""
    _sync(session, "--all-packages", "--group", "dev")
    _pytest(session, "tests", "--ignore=tests/faults")


# Every distribution but xjobs-django (Django 6 needs 3.12) declares Python 3.11+; the workspace's
# own environment is 3.12, so their tests run once more on 3.11, with uv.lock's pins less Django's.
PY311_PACKAGES = (
    "xjobs-core",
    "xjobs-pg",
    "xjobs-redis",
    "xjobs-sqlite",
    "xjobs-cli",
    "xjobs-web",
    "xjobs-kit",
)
NOT_ON_311 = ("django", "django-stubs", "django-stubs-ext")


def _python_311() -> str | None:
    """An interpreter of Python 3.11 on this machine (PATH, then pyenv's versions), if any."""
    found = [shutil.which("python3.11")]
    found += sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.11*/bin/python3")))
    for candidate in filter(None, found):
        probe = [candidate, "-c", "import sys; sys.exit(sys.version_info[:2] != (3, 11))"]
        if subprocess.run(probe, capture_output=True, check=False).returncode == 0:
            return candidate
    return None


@nox.session(name="tests-311", python=_python_311() or "3.11")
def tests_311(session: nox.Session) -> None:
    """The tests of every distribution that declares Python 3.11, on 3.11 (uv.lock is resolved
    for 3.12, so its pins are exported, less Django's, and installed into this venv)."""
    requirements = Path(session.create_tmp()).resolve() / "requirements.txt"
    skip = [arg for name in NOT_ON_311 for arg in ("--no-emit-package", name)]
    # the export reads the lock as the workspace's 3.12 interpreter (nox's own), not this venv's
    session.run_install(
        "uv", "export", "--locked", "--all-packages", "--group", "dev", "--no-emit-workspace",
        "--no-hashes", "--quiet", *skip, "--output-file", str(requirements),
        env={"UV_PYTHON": sys.executable}, external=True,
    )  # fmt: skip
    session.install("-r", str(requirements))
    editable = [arg for name in PY311_PACKAGES for arg in ("-e", f"packages/{name}")]
    session.install("--no-deps", *editable)
    suites = [f"packages/{name}/tests" for name in PY311_PACKAGES]
    _pytest(session, *(s for s in suites if (ROOT / s).is_dir()))


@nox.session
@nox.parametrize("driver", list(_drivers()))
def parity(session: nox.Session, driver: str) -> None:
    """The parity suite against one driver, in a venv holding only xjobs-core, that driver, pytest
    and hypothesis."""
    dist = _drivers()[driver]
    _sync(session, "--package", dist, "--no-default-groups")
    session.install(_locked("pytest"), _locked("hypothesis"))
    session.run(
        "python",
        "-c",
        "import sys, xjobs.contract.plugins as p; names = [b.factory.name for b in p.installed_backends()]; "
        f"sys.exit(0 if {driver!r} in names else 'driver {driver} was not found through its entry point: ' + str(names))",
    )
    _parity_suite(session, driver)


def _parity_suite(session: nox.Session, driver: str, *args: str, **env: str) -> None:
    """Run the parity suite against `driver` outside the repository, as a third party would: no
    project pytest config, no conftest, only what the installed distributions ship (`args`: more
    pytest arguments)."""
    env["XJOBS_REQUIRE_SERVERS"] = os.environ.get("XJOBS_REQUIRE_SERVERS", "")
    tmp = Path(session.create_tmp()).resolve()
    ini = tmp / "pytest.ini"
    ini.write_text("[pytest]\n")
    session.chdir(tmp)
    session.run(
        "python", "-m", "pytest", "-c", str(ini), "-p", "no:cacheprovider",
        "--pyargs", "xjobs.testing.parity", f"--xjobs-backend={driver}", *args, *session.posargs,
        env=env,
    )  # fmt: skip


@nox.session(name="model-long")
@nox.parametrize("driver", list(_drivers()))
def model_long(session: nox.Session, driver: str) -> None:
    """The model test of the driver contract (parity `contract/test_model.py`) on one driver with
    the `xjobs-model-long` Hypothesis profile: many more and longer examples (not a default session)."""
    _sync(session, "--package", _drivers()[driver], "--no-default-groups")
    session.install(_locked("pytest"), _locked("hypothesis"))
    model = "test_the_driver_agrees_with_the_reference_model"
    _parity_suite(session, driver, "-k", model, XJOBS_MODEL_PROFILE="xjobs-model-long")


# The site's tools, pinned here (not in uv.lock: only this session needs them).
DOCS_TOOLS = ("mkdocs-material==9.8.2", "mkdocstrings[python]==1.0.8")


@nox.session
def docs(session: nox.Session) -> None:
    """The documentation site: `mkdocs build --strict` into a temporary directory (a broken link,
    a missing page or an unresolved reference fails). The reference pages are generated from the
    code at build time (docs/hooks/reference.py), so every distribution is installed."""
    _sync(session, "--all-packages", "--all-extras", "--no-default-groups")
    session.install(*DOCS_TOOLS, _locked("ruff"))  # ruff formats the signatures
    site = Path(session.create_tmp()).resolve() / "site"
    env = {"NO_MKDOCS_2_WARNING": "1"}
    session.run("mkdocs", "build", "--strict", "--site-dir", str(site), env=env)


# The peers of the benchmark, pinned; oban (the Python edition) needs Python 3.12, and arq caps
# redis-py below 6 (saq below 8), so the bench venv runs arq's, saq's and xjobs's Redis clients on
# redis-py 5. matplotlib draws the picture (bench/results/latest.svg).
PEERS = (
    "procrastinate==3.10.0",
    "pgqueuer[asyncpg]==1.6.0",
    "saq[postgres,redis]==0.26.4",
    "arq==0.28.0",
    "redis==5.3.1",
    "pyinstrument==5.1.3",
    "matplotlib==3.11.2",
)
# Celery's kombu needs redis-py 6.4+ and taskiq-redis 8+: these peers run in a second venv (the
# workspace from uv.lock, redis-py 8 as locked, and them), `python -m bench --peers-python`
PEERS_OWN_VENV = (
    "celery[redis]==5.7.0",
    "dramatiq[redis]==2.2.1",
    "rq==2.12.0",
    "huey==3.5.4",
    "taskiq==0.13.0",
    "taskiq-redis==1.2.4",
    "dbos==3.4.0",
    "pyinstrument==5.1.3",
)
PEERS_312 = ("oban==0.7.0",)


def _python_312() -> str | None:
    """An interpreter of Python 3.12 or newer on this machine (PATH, then pyenv's versions), if any."""
    found = [shutil.which(f"python3.{minor}") for minor in (12, 13)]
    found += sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.1[2-9]*/bin/python3")))
    for candidate in filter(None, found):
        probe = [candidate, "-c", "import sys; sys.exit(sys.version_info < (3, 12))"]
        if subprocess.run(probe, capture_output=True, check=False).returncode == 0:
            return candidate
    return None


@nox.session(python=_python_312())
def bench(session: nox.Session) -> None:
    """The benchmark (not a default session): xjobs, the peers and the raw ceilings in one run.

    `uv run nox -s bench -- --help` lists the flags (workloads, backends, libraries, n, reps);
    `uv run nox -s bench -- --quick` runs the headline rows in a few minutes.
    """
    # the optional extras too (W3c10obs runs with the metrics and the tracing on), and the
    # OpenTelemetry SDK, whose spans that workload exports (to nowhere)
    _sync(session, "--all-packages", "--all-extras", "--no-default-groups")
    session.install(_locked("opentelemetry-sdk"))
    python_312 = session.run(
        "python", "-c", "import sys; print(sys.version_info >= (3, 12))", silent=True
    )
    peers = PEERS + (PEERS_312 if str(python_312).strip() == "True" else ())
    session.install(*peers)
    own = Path(f"{session.virtualenv.location}-peers")
    python = str(Path(session.virtualenv.location) / "bin" / "python")
    env = {"UV_PROJECT_ENVIRONMENT": str(own)}
    session.run_install(
        "uv", "sync", "--locked", "--all-packages", "--all-extras", "--no-default-groups",
        "--python", python, env=env, external=True,
    )  # fmt: skip
    session.run_install(
        "uv", "pip", "install", "--python", str(own / "bin" / "python"), *PEERS_OWN_VENV,
        external=True,
    )  # fmt: skip
    session.run(
        "python", "-m", "bench", "--peers-python", str(own / "bin" / "python"), *session.posargs
    )


# The fault scenarios on replicas and fan-ins (a Postgres or Sentinel failover, kill -9 mid-fan-in):
# the longest of the suite, their own session, which CI runs beside `faults`.
FAILOVER_FAULTS = (
    "tests/faults/test_failover_pg.py",
    "tests/faults/test_failover_redis.py",
    "tests/faults/test_children_kill.py",
)


@nox.session
def faults(session: nox.Session) -> None:
    """The fault suite (tests/faults, less `faults-failover`'s): real servers and real worker,
    scheduler and relay processes under kill -9, restarts, cut connections, partitions, SIGSTOP
    and hostile input.

    `uv run nox -s faults -- --report` also writes the run's ledger into docs/reliability.md.
    """
    _sync(session, "--all-packages", "--group", "dev")
    _pytest(session, "tests/faults", *(f"--ignore={path}" for path in FAILOVER_FAULTS))


@nox.session(name="faults-failover")
def faults_failover(session: nox.Session) -> None:
    """The fault scenarios on replicas and fan-ins: a Postgres standby promoted and a Redis
    Sentinel failover under load, and kill -9 of workers while a parent maps 1,000 children."""
    _sync(session, "--all-packages", "--group", "dev")
    _pytest(session, *FAILOVER_FAULTS)


@nox.session(name="parity-sqlite-apsw")
def parity_sqlite_apsw(session: nox.Session) -> None:
    """The SQLite parity suite on apsw (`?driver=apsw`, the xjobs-sqlite[apsw] extra: a bundled
    current SQLite), in a venv holding only xjobs-core, xjobs-sqlite with that extra, pytest and
    hypothesis."""
    _sync(session, "--package", "xjobs-sqlite", "--extra", "apsw", "--no-default-groups")
    session.install(_locked("pytest"), _locked("hypothesis"))
    _parity_suite(session, "sqlite", XJOBS_TEST_SQLITE_DRIVER="apsw")


@nox.session(name="parity-pgbouncer")
def parity_pgbouncer(session: nox.Session) -> None:
    """The Postgres parity suite and the Postgres restart faults through a real pgbouncer in
    transaction mode (`XJOBS_TEST_POSTGRES_POOLER=pgbouncer`: every test URL crosses it)."""
    _sync(session, "--all-packages", "--group", "dev")
    _parity_suite(session, "postgres", XJOBS_TEST_POSTGRES_POOLER="pgbouncer")
    session.chdir(ROOT)
    restarts = ("tests/faults/test_pg_restart.py", "tests/faults/test_restart.py")
    env = {
        "XJOBS_TEST_POSTGRES_POOLER": "pgbouncer",
        "XJOBS_REQUIRE_SERVERS": os.environ.get("XJOBS_REQUIRE_SERVERS", ""),
    }
    session.run("python", "-m", "pytest", *restarts, "-k", "not redis", *session.posargs, env=env)


# The lowest redis-py xjobs-redis declares (packages/xjobs-redis/pyproject.toml).
REDIS_FLOOR = "redis==5.3.0"


@nox.session(name="parity-redis-floor")
def parity_redis_floor(session: nox.Session) -> None:
    """The Redis parity suite on the lowest redis-py xjobs-redis declares, not the locked one:
    the driver reaches into redis-py's connections (its lanes), whose API moved between 5 and 8."""
    _sync(session, "--package", "xjobs-redis", "--no-default-groups")
    session.install(_locked("pytest"), _locked("hypothesis"), REDIS_FLOOR)
    session.run("python", "-c", "import redis; print('redis-py', redis.__version__)")
    _parity_suite(session, "redis")


@nox.session(name="parity-redis-cluster")
def parity_redis_cluster(session: nox.Session) -> None:
    """The Redis parity suite, then the many-hosts test (4 workers, 2 schedulers) and the health
    baseline, on a real
    3-master Redis Cluster on loopback (`XJOBS_TEST_REDIS_CLUSTER=1`: the fixture starts it, and
    every Redis test URL is `redis+cluster://`)."""
    _sync(session, "--all-packages", "--group", "dev")
    _parity_suite(session, "redis", XJOBS_TEST_REDIS_CLUSTER="1")
    session.chdir(ROOT)
    env = {
        "XJOBS_TEST_REDIS_CLUSTER": "1",
        "XJOBS_REQUIRE_SERVERS": os.environ.get("XJOBS_REQUIRE_SERVERS", ""),
    }
    many = "tests/e2e/test_many_hosts.py"
    session.run("python", "-m", "pytest", many, "-k", "redis", *session.posargs, env=env)
    baseline = "packages/xjobs-redis/tests/test_health.py::test_the_baseline_at_open_reads_the_servers_run_id_and_persistence"
    session.run("python", "-m", "pytest", baseline, *session.posargs, env=env)
