"""The Jinja2 templates shipped in the wheel, their filters, and a page rendered for one visit."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlencode

from jinja2 import Environment, PackageLoader, select_autoescape
from starlette.responses import HTMLResponse

from xjobs.operate.timefmt import age, iso, span


def _json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)


def _first_line(text: str | None, width: int = 120) -> str:
    line = (text or "").split("\n", 1)[0]
    return line if len(line) <= width else line[: width - 1] + "…"


def _query(params: dict[str, Any], **changes: Any) -> str:
    merged = {**params, **changes}
    pairs = [
        (k, item)
        for k, v in merged.items()
        if v not in (None, "", [])
        for item in (v if isinstance(v, list | tuple) else [v])
    ]
    return urlencode(pairs)


def environment() -> Environment:
    """The template environment: autoescaped HTML, and the time and text filters the pages use."""
    env = Environment(
        loader=PackageLoader("xjobs_web", "templates"),
        autoescape=select_autoescape(["html"]),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(
        age=lambda ms, now: "-" if ms is None else age(ms, now),
        iso=lambda ms: "-" if ms is None else iso(ms),
        span=span,
        tojson_pretty=_json,
        first_line=_first_line,
        pct=lambda v: "-" if v is None else f"{v:.1%}",
    )
    env.globals["query"] = _query
    return env


def html(
    env: Environment, template: str, context: dict[str, Any], status: int = 200
) -> HTMLResponse:
    """`template` rendered with `context` as an HTML response."""
    return HTMLResponse(env.get_template(template).render(context), status_code=status)
