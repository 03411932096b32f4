"""`xjobs.__all__` is the public surface: the registrars (what stamps and registers handles) stay out of it.

Registration happens in one place, `App(jobs=..., tasks=...)`; a public registrar would be a
second way in that skips the app's duplicate checks and its binding of each handle.
"""

from __future__ import annotations

import inspect

import xjobs
from xjobs.declare import registry


def _registrars() -> set[str]:
    return {
        name
        for name, value in vars(registry).items()
        if (inspect.isfunction(value) or inspect.isclass(value))
        and value.__module__ == registry.__name__
    }


def test_the_registrars_are_not_public() -> None:
    registrars = _registrars()
    assert "Registry" in registrars
    assert not registrars & set(xjobs.__all__)
    assert not {n for n in xjobs.__all__ if n.lower().startswith(("register", "stamp"))}


def test_the_retention_policy_is_public_where_the_docs_import_it() -> None:
    from xjobs.contract.retention import Retention

    assert xjobs.Retention is Retention
    assert "Retention" in xjobs.__all__
