"""The Redis plugin: entry point `redis` in group `xjobs`, schemes `redis` and `rediss`."""

from __future__ import annotations

from xjobs.contract.hookspecs import hookimpl
from xjobs.contract.plugins import BackendFactory
from xjobs_redis.backend import open_backend
from xjobs_redis.testing import test_backend


@hookimpl
def xjobs_backends() -> list[BackendFactory]:
    return [
        BackendFactory(
            name="redis",
            schemes=("redis", "rediss"),
            open=open_backend,
            test_backend=test_backend,
            description="Redis 6.2+: jobs in Lua scripts, one hash-tagged slot per queue; polled",
        )
    ]
