"""The Redis plugin: entry point `redis` in group `xjobs`, schemes `redis`, `rediss` and their `+cluster` and `+sentinel` forms."""

from __future__ import annotations

from xjobs.contract.factory import BackendFactory
from xjobs.contract.hookspecs import hookimpl
from xjobs_redis.backend import open_backend


@hookimpl
def xjobs_backends() -> list[BackendFactory]:
    """The Redis backend's factory (schemes `redis`, `rediss`, `redis+cluster`, `rediss+cluster`,
    `redis+sentinel`, `rediss+sentinel`)."""
    return [
        BackendFactory(
            name="redis",
            schemes=(
                "redis",
                "rediss",
                "redis+cluster",
                "rediss+cluster",
                "redis+sentinel",
                "rediss+sentinel",
            ),
            open=open_backend,
            # Named, not imported: the test servers load only when a test opens one.
            test_backend="xjobs_redis.testing:test_backend",
            description="Redis 6.2+: jobs in Lua scripts, one hash-tagged slot per queue; polled",
        )
    ]
