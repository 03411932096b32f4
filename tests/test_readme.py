"""The README's quick start is real code: it runs as printed and does what it says."""

from __future__ import annotations

import asyncio
import os
import re
import secrets
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import asyncpg

from xjobs_pg.backend import asyncpg_dsn
from xjobs_pg.servers import ServerUnavailable, postgres_url, unavailable

README = Path(__file__).parents[1] / "README.md"


def test_the_quick_start_runs_and_completes_its_job(tmp_path: Path) -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    assert blocks, "the README has no python block"
    script = tmp_path / "quick_start.py"
    script.write_text(blocks[0])
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert "receipt for 42 (attempt 1)" in done.stdout
    assert "completed=1" in done.stdout


def test_the_workflow_example_runs_each_step_once_and_completes(tmp_path: Path) -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    workflow = [block for block in blocks if "ctx.step" in block]
    assert len(workflow) == 1, "the README has one workflow example"
    script = tmp_path / "workflow.py"
    script.write_text(workflow[0])
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "charging 1250 for A-7",
        "reserved stock for A-7",
        "waiting",
        "ch_A-7: shipped by DHL",
        "completed",
    ]


def test_the_nightly_task_example_fires_the_latest_missed_night_once(tmp_path: Path) -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    nightly = [block for block in blocks if "task(" in block]
    assert len(nightly) == 1, "the README has one cron task example"
    script = tmp_path / "nightly.py"
    script.write_text(nightly[0])
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "building the report of 2026-01-01",
        "fired for 2026-01-02 02:30:00+01:00",
    ]


async def _database(server: str, name: str, *, drop: bool = False) -> None:
    conn = await asyncpg.connect(asyncpg_dsn(server)[0])
    try:
        verb = "drop database if exists" if drop else "create database"
        suffix = " with (force)" if drop else ""
        await conn.execute(f'{verb} "{name}"{suffix}')
    finally:
        await conn.close()


def test_the_outbox_example_stages_with_psycopg_and_asyncpg_and_runs_both(
    tmp_path: Path,
) -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    outbox = [block for block in blocks if ".stage(" in block]
    assert len(outbox) == 1, "the README has one outbox example"
    try:
        server = postgres_url()
    except ServerUnavailable as exc:
        unavailable(f"no Postgres server for the README's outbox example: {exc}")
    name = f"xjobs_readme_{secrets.token_hex(4)}"
    asyncio.run(_database(server, name))
    try:
        script = tmp_path / "outbox.py"
        script.write_text(outbox[0])
        url = urlunsplit(urlsplit(asyncpg_dsn(server)[0])._replace(path=f"/{name}"))
        done = subprocess.run(
            [sys.executable, str(script)],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            env={**os.environ, "DATABASE_URL": url},
        )
    finally:
        asyncio.run(_database(server, name, drop=True))
    assert done.returncode == 0, done.stderr
    assert sorted(done.stdout.splitlines()) == ["receipt for order A-1", "receipt for order A-2"]
