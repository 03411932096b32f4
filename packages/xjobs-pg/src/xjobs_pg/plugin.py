"""The Postgres plugin: entry point `postgres` in group `xjobs`, schemes `postgres` and `postgresql`."""

from __future__ import annotations

from xjobs.contract.factory import BackendFactory
from xjobs.contract.hookspecs import hookimpl
from xjobs_pg.backend import open_backend

# Named, not imported: the test servers (and `pwd`) load only when a test opens a backend.
TEST_BACKEND = "xjobs_pg.testing:test_backend"


@hookimpl
def xjobs_backends() -> list[BackendFactory]:
    """The `postgres` backend factory."""
    return [
        BackendFactory(
            name="postgres",
            schemes=("postgres", "postgresql"),
            open=open_backend,
            test_backend=TEST_BACKEND,
            description="Postgres 13+: durable jobs, skip-locked claims, LISTEN/NOTIFY wake",
        )
    ]
