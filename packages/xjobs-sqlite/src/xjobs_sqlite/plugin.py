"""The SQLite plugin: entry point `sqlite` in group `xjobs`, scheme `sqlite`."""

from __future__ import annotations

from xjobs.contract.factory import BackendFactory
from xjobs.contract.hookspecs import hookimpl
from xjobs_sqlite.backend import open_backend

# Named, not imported: the temporary directories of the test backends load only in tests.
TEST_BACKEND = "xjobs_sqlite.testing:test_backend"


@hookimpl
def xjobs_backends() -> list[BackendFactory]:
    """The `sqlite` backend factory."""
    return [
        BackendFactory(
            name="sqlite",
            schemes=("sqlite",),
            open=open_backend,
            test_backend=TEST_BACKEND,
            description="SQLite file on one host: durable jobs for several processes, no server",
        )
    ]
