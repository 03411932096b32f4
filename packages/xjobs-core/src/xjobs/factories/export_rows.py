"""`export_rows()`: a paged export over `job()` — one object per page, named by its page index, one tenant per run."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any, TypeVar

from pydantic import BaseModel

from xjobs.declare.job import JobHandle, job
from xjobs.declare.retry import Retry
from xjobs.factories.backfill_errors import BackfillInvalidError, ExportScopeError
from xjobs.factories.backfill_pass import Page, check_cursor
from xjobs.factories.sinks import NAME_PART, Sink
from xjobs.names import DEFAULT_QUEUE, validate_job_name
from xjobs.options import finite_count
from xjobs.run.context import JobContext

T = TypeVar("T")
MAX_PAGE = 100_000
MAX_PAGES = 100_000

ExportFetch = Callable[[Any, int, str], Awaitable[Page[T]]]


class ExportInput(BaseModel):
    """One export: the tenant whose rows it writes (required) and the export's own id."""

    tenant: str
    export_id: str


def page_name(value: ExportInput, index: int) -> str:
    """The object one page is written as: `<tenant>/<export_id>/page-<index>.jsonl` (6 digits)."""
    return f"{value.tenant}/{value.export_id}/page-{index:06d}.jsonl"


def page_step(index: int) -> str:
    """The step of the page at `index` (0 first)."""
    return f"page-{index}"


def _scoped(value: ExportInput, name: str) -> ExportInput:
    for field, text in (("tenant", value.tenant), ("export_id", value.export_id)):
        if text == "none" and field == "tenant":
            raise ExportScopeError(f"export {name!r} has no cross-tenant escape: tenant 'none'")
        if not NAME_PART.fullmatch(text):
            raise ExportScopeError(f"export {name!r}: {field} {text!r} is not [A-Za-z0-9._-]")
    return value


def _encode(rows: list[Any]) -> bytes:
    return "".join(json.dumps(r, ensure_ascii=False, default=str) + "\n" for r in rows).encode()


def export_rows(
    name: str,
    *,
    fetch: ExportFetch[T],
    sink: Sink,
    page_size: int = 1_000,
    queue: str = DEFAULT_QUEUE,
    retry: Retry | None = None,
    timeout: timedelta | None = None,
) -> JobHandle[ExportInput]:
    """A paged export: `fetch(cursor, page_size, tenant)` answers a `Page` of the tenant's rows and
    the next cursor (`None` at the end); each page is a durable step that writes ONE object,
    `page_name(input, index)`, as JSON lines through `sink`, and persists only its cursor and row
    count. A crash resumes at the page it stopped at (that page is written again, replacing it).
    A run acts for the one tenant its input names; there is no cross-tenant export. Answers the
    pages and rows written.
    """
    name = validate_job_name(name, what="export")
    size = finite_count("export page_size", page_size, minimum=1, maximum=MAX_PAGE)
    if not callable(fetch) or not hasattr(sink, "put"):
        raise BackfillInvalidError(f"export {name!r} needs a callable fetch and a Sink")

    async def page(value: ExportInput, index: int, cursor: Any, rows: int) -> dict[str, Any]:
        got = await fetch(cursor, size, value.tenant)
        items = list(got.items)
        done = got.cursor is None or not items
        if not done:
            check_cursor(got.cursor, cursor, name)
        if items or index == 0:
            await sink.put(page_name(value, index), _encode(items))
        written = index + 1 if items or index == 0 else index
        return {
            "cursor": None if done else got.cursor,
            "rows": rows + len(items),
            "pages": written,
            "done": done,
        }

    async def body(ctx: JobContext, value: ExportInput) -> dict[str, int]:
        value = _scoped(value, name)
        cursor: Any = None
        rows = pages = 0
        for index in range(MAX_PAGES):
            state = await ctx.step.run(page_step(index), page, value, index, cursor, rows)
            cursor, rows, pages = state["cursor"], int(state["rows"]), int(state["pages"])
            if state["done"]:
                break
        return {"pages": pages, "rows": rows}

    return job(
        body,
        tenant=lambda v: _scoped(v, name).tenant,
        idempotency_key=lambda v: f"{v.tenant}:{v.export_id}",
        name=name,
        queue=queue,
        input_model=ExportInput,
        retry=retry if retry is not None else Retry(attempts=5),
        timeout=timeout,
    )
