"""With no backend named anywhere, an App keeps its jobs in ./xjobs.db and says which file; memory
only when asked for; without xjobs-sqlite the refusal names the package to install."""

from __future__ import annotations

import asyncio
import logging
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import xjobs
from xjobs.contract import plugins
from xjobs.errors import BackendUnknownError

DONE_WITHIN_S = 60.0

APP = """\
from pydantic import BaseModel

import xjobs


class Ping(BaseModel):
    n: int


@xjobs.job(tenant="none", idempotency_key=lambda p: str(p.n))
async def ping(ctx: xjobs.JobContext, input: Ping) -> None:
    print(f"ping {input.n}", flush=True)


app = xjobs.App(jobs=[ping])
"""


@pytest.fixture
def app_module(app_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """`noname.py` in the working directory: an App that names no backend."""
    (app_dir / "noname.py").write_text(APP)
    monkeypatch.syspath_prepend(str(app_dir))
    return app_dir


async def _enqueue(n: int) -> str:
    import noname  # type: ignore[import-not-found]

    async with noname.app:
        return str((await noname.ping.enqueue(noname.Ping(n=n))).job_id)


async def _state(url: str, job_id: str) -> str:
    async with xjobs.App(url, retention=None) as app:
        return (await app.get_job(job_id)).state


def test_an_app_that_names_no_backend_keeps_its_jobs_in_xjobs_db_and_says_where(
    app_module: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="xjobs.backend"):
        job_id = asyncio.run(_enqueue(1))

    assert (app_module / "xjobs.db").is_file()
    assert asyncio.run(_state(f"sqlite:///{app_module / 'xjobs.db'}", job_id)) == "ready"
    told = [r.getMessage() for r in caplog.records if r.name == "xjobs.backend"]
    assert told == [
        f"no backend named: jobs are kept in {app_module / 'xjobs.db'} (sqlite:///xjobs.db)"
    ]


def test_xjobs_worker_serves_an_app_with_no_backend_from_xjobs_db_and_logs_the_file(
    app_module: Path,
) -> None:
    job_id = asyncio.run(_enqueue(2))
    worker = subprocess.Popen(
        [sys.executable, "-m", "xjobs_cli", "worker", "noname:app"],
        cwd=app_module,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + DONE_WITHIN_S
        url = f"sqlite:///{app_module / 'xjobs.db'}"
        while (state := asyncio.run(_state(url, job_id))) != "completed":
            if time.monotonic() > deadline or worker.poll() is not None:
                break
            time.sleep(0.1)
        worker.send_signal(signal.SIGTERM)
        out, err = worker.communicate(timeout=60)
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.communicate()
    assert state == "completed", err
    assert "ping 2" in out
    assert f"jobs are kept in {app_module / 'xjobs.db'}" in err


@pytest.fixture
def no_plugins(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No driver installed but what core registers itself (entry points not read)."""
    monkeypatch.setenv("XJOBS_DISABLE_PLUGINS", "1")
    plugins.reset_registry()
    yield
    monkeypatch.delenv("XJOBS_DISABLE_PLUGINS")
    plugins.reset_registry()


@pytest.mark.usefixtures("no_plugins", "app_dir")
def test_without_xjobs_sqlite_the_default_is_refused_naming_the_package() -> None:
    with pytest.raises(BackendUnknownError) as caught:
        asyncio.run(xjobs.App(retention=None).open())

    assert "pip install xjobs-sqlite" in caught.value.message
    assert "memory://" in caught.value.message
