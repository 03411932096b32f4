"""`export_rows()` and the sinks: one object per page named by its index, one tenant per run, resumable (factories/export_rows.py, sinks.py)."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from xjobs import App
from xjobs.declare.retry import Retry
from xjobs.factories import DirectorySink, ExportInput, Page, Sink, export_rows
from xjobs.factories.backfill_errors import ExportScopeError, ExportSinkError
from xjobs.factories.export_rows import page_name

NOW_RETRY = Retry(attempts=3, base=timedelta(0), cap=timedelta(0))
ROWS: dict[str, list[dict[str, Any]]] = {
    "org-1": [{"id": i, "org": "org-1"} for i in range(1, 6)],
    "org-2": [{"id": 9, "org": "org-2"}],
}


class Table:
    """A tenant's rows after a cursor (the last id); `fail_at` raises once on that page's fetch."""

    def __init__(self, fail_at: int | None = None) -> None:
        self.fetches: list[Any] = []
        self.fail_at = fail_at

    async def fetch(self, cursor: Any, limit: int, tenant: str) -> Page[dict[str, Any]]:
        self.fetches.append(cursor)
        if self.fail_at is not None and cursor == self.fail_at:
            self.fail_at = None
            raise RuntimeError("the database went away")
        after = 0 if cursor is None else int(cursor)
        items = [r for r in ROWS.get(tenant, []) if r["id"] > after][:limit]
        return Page(items, items[-1]["id"] if len(items) == limit else None)


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.asyncio
async def test_each_page_is_one_object_named_by_its_index(tmp_path: Path) -> None:
    table, sink = Table(), DirectorySink(tmp_path)
    export = export_rows("export_orders", fetch=table.fetch, sink=sink, page_size=2)
    async with App("memory://", jobs=[export]) as app:
        run = await app.enqueue(export, ExportInput(tenant="org-1", export_id="e1"))
        await app.run_worker(until_idle=True)
        record = await app.get_job(run.job_id)
        steps = await app.get_steps(run.job_id)
        value = await export.result(run.job_id)
    assert record.state == "completed", record.last_error
    assert value == {"pages": 3, "rows": 5}
    assert [s.name for s in steps] == ["page-0", "page-1", "page-2"]
    assert all("org-1" not in (s.result or "") for s in steps)  # a step holds no row
    folder = tmp_path / "org-1" / "e1"
    assert sorted(p.name for p in folder.iterdir()) == [
        "page-000000.jsonl",
        "page-000001.jsonl",
        "page-000002.jsonl",
    ]
    assert [r["id"] for r in _lines(folder / "page-000002.jsonl")] == [5]
    assert isinstance(sink, Sink)


@pytest.mark.asyncio
async def test_a_crash_resumes_at_the_page_it_stopped_at(tmp_path: Path) -> None:
    table = Table(fail_at=4)  # the third page's fetch fails once
    export = export_rows(
        "export_orders",
        fetch=table.fetch,
        sink=DirectorySink(tmp_path),
        page_size=2,
        retry=NOW_RETRY,
    )
    async with App("memory://", jobs=[export]) as app:
        run = await app.enqueue(export, ExportInput(tenant="org-1", export_id="e1"))
        await app.run_worker(until_idle=True)
        record = await app.get_job(run.job_id)
    assert (record.state, record.attempt) == ("completed", 2)
    assert table.fetches == [None, 2, 4, 4]  # the retry fetched only the page it stopped at
    rows = [r["id"] for p in sorted((tmp_path / "org-1" / "e1").iterdir()) for r in _lines(p)]
    assert rows == [1, 2, 3, 4, 5]


@pytest.mark.asyncio
async def test_an_export_sees_only_its_tenant_and_has_no_cross_tenant_escape(
    tmp_path: Path,
) -> None:
    table = Table()
    export = export_rows("export_orders", fetch=table.fetch, sink=DirectorySink(tmp_path))
    async with App("memory://", jobs=[export]) as app:
        run = await app.enqueue(export, ExportInput(tenant="org-2", export_id="e2"))
        await app.run_worker(until_idle=True)
        assert (await app.get_job(run.job_id)).state == "completed"
        with pytest.raises(ExportScopeError, match="no cross-tenant escape"):
            await app.enqueue(export, ExportInput(tenant="none", export_id="e3"))
        with pytest.raises(ExportScopeError, match="is not"):
            await app.enqueue(export, ExportInput(tenant="../org-1", export_id="e4"))
    assert [r["org"] for r in _lines(tmp_path / "org-2" / "e2" / "page-000000.jsonl")] == ["org-2"]
    assert not (tmp_path / "org-1").exists()


@pytest.mark.asyncio
async def test_an_empty_export_still_writes_its_first_page(tmp_path: Path) -> None:
    export = export_rows("export_orders", fetch=Table().fetch, sink=DirectorySink(tmp_path))
    async with App("memory://", jobs=[export]) as app:
        run = await app.enqueue(export, ExportInput(tenant="org-9", export_id="e1"))
        await app.run_worker(until_idle=True)
        value = await export.result(run.job_id)
    assert value == {"pages": 1, "rows": 0}
    assert (tmp_path / "org-9" / "e1" / "page-000000.jsonl").read_text() == ""


def test_the_page_name_carries_tenant_export_and_index() -> None:
    assert page_name(ExportInput(tenant="org-1", export_id="x"), 12) == "org-1/x/page-000012.jsonl"


@pytest.mark.asyncio
@pytest.mark.parametrize("name", ["", "/abs", "a/../b", "a//b", ".hidden", "a\\b", "x" * 1_001])
async def test_the_directory_sink_refuses_a_name_that_leaves_its_root(
    tmp_path: Path, name: str
) -> None:
    with pytest.raises(ExportSinkError):
        await DirectorySink(tmp_path).put(name, b"x")
    assert not any(tmp_path.iterdir())  # noqa: ASYNC240 - a test reads its own tmp dir


@pytest.mark.asyncio
async def test_the_directory_sink_replaces_an_object_whole(tmp_path: Path) -> None:
    sink = DirectorySink(tmp_path)
    await sink.put("a/b.jsonl", b"first\n")
    await sink.put("a/b.jsonl", b"second\n")
    assert (tmp_path / "a" / "b.jsonl").read_bytes() == b"second\n"
    assert [p.name for p in (tmp_path / "a").iterdir()] == ["b.jsonl"]  # no temporary file left
