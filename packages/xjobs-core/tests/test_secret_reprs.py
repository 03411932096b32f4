"""A backend URL's password never reaches a repr, a str or a printed URL (issue 40, item 12)."""

from __future__ import annotations

import dataclasses

import pytest

import xjobs
from xjobs.contract.backend import redacted_text, redacted_url


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql://app:s3cret@db:5432/x", "postgresql://app:***@db:5432/x"),
        ("redis://:s3cret@cache:6379/0", "redis://:***@cache:6379/0"),
        ("rediss://default:s3cret@cache/0", "rediss://default:***@cache/0"),
        (
            "postgresql://app@db/x?password=s3cret&sslmode=require",
            "postgresql://app@db/x?password=***&sslmode=require",
        ),
        ("redis://cache/0?password=s3cret", "redis://cache/0?password=***"),
        ("postgresql://app@db/x?xjobs_schema=s", "postgresql://app@db/x?xjobs_schema=s"),
        ("memory://", "memory://"),
        ("postgresql://app:s3cret@[::1/x", "postgresql://app:***@[::1/x"),  # does not parse
    ],
)
def test_a_printed_url_hides_its_password(url: str, shown: str) -> None:
    assert redacted_url(url) == shown


def test_a_text_hides_every_url_password_in_it() -> None:
    text = "connecting to postgresql://a:s3cret@db/x?password=s3cret failed"
    assert redacted_text(text) == "connecting to postgresql://a:***@db/x?password=*** failed"


@pytest.mark.asyncio
@pytest.mark.parametrize(
    "url", ["postgresql://app:s3cret@db/x", "redis://:s3cret@cache/0?password=s3cret"]
)
async def test_a_backend_repr_and_str_hide_the_password(url: str) -> None:
    backend = await xjobs.connect("memory://")
    try:
        shown = dataclasses.replace(backend, url=url)
        for text in (repr(shown), str(shown), f"{shown}", repr([shown])):
            assert "s3cret" not in text
            assert redacted_url(url) in text
    finally:
        await backend.close()
