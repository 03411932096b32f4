"""`job(redact=Redact(...))`: checked at declaration, `redact_input=` kept as its shorthand, described."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from xjobs import JobContext, job
from xjobs.declare.describe import describe_job
from xjobs.declare.job import Redact
from xjobs.errors import DeclarationInvalidError


class Card(BaseModel):
    number: str


def _declare(**options: Any) -> Any:
    async def charge(ctx: JobContext, input: Card) -> None:
        return None

    return job(charge, tenant="none", idempotency_key=lambda c: c.number, **options)


def _hide(*_: object) -> str:
    return "***"


def test_redact_input_is_the_input_hook_of_redact() -> None:
    handle = _declare(redact_input=_hide)
    assert handle.redact == Redact(input=_hide)
    assert handle.redact_input is _hide


def test_redact_declares_each_hook() -> None:
    handle = _declare(redact=Redact(input=_hide, key=_hide, steps=_hide))
    assert (handle.redact.input, handle.redact.key, handle.redact.steps) == (_hide, _hide, _hide)
    assert describe_job(handle)["redacts"] == {"input": True, "key": True, "steps": True}
    assert describe_job(_declare())["redacts"] == {"input": False, "key": False, "steps": False}


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"redact": Redact(input=_hide), "redact_input": _hide}, "redact_input="),
        ({"redact": {"key": _hide}}, "redact of job"),
        ({"redact": Redact(key="***")}, "redact.key"),  # type: ignore[arg-type]
        ({"redact_input": "***"}, "redact_input"),
    ],
)
def test_a_bad_redact_is_refused_at_declaration(options: dict[str, Any], named: str) -> None:
    with pytest.raises(DeclarationInvalidError) as caught:
        _declare(**options)
    assert caught.value.code == "XJOBS_DECLARATION_INVALID"
    assert named in caught.value.message
