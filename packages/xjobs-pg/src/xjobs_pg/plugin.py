"""The Postgres plugin: entry point `postgres` in group `xjobs`, schemes `postgres` and `postgresql`."""

from __future__ import annotations

from xjobs.contract.hookspecs import hookimpl
from xjobs.contract.plugins import BackendFactory
from xjobs_pg.backend import open_backend
from xjobs_pg.testing import test_backend


@hookimpl
def xjobs_backends() -> list[BackendFactory]:
    return [
        BackendFactory(
            name="postgres",
            schemes=("postgres", "postgresql"),
            open=open_backend,
            test_backend=test_backend,
            description="Postgres 13+: durable jobs, skip-locked claims, LISTEN/NOTIFY wake",
        )
    ]
