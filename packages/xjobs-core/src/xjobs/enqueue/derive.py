"""What an enqueue derives from each input beside its idempotency key: the job's own tenant
(refused for an actor of another org), and the concurrency and rate keys a worker derives later."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from xjobs.declare.job import JobHandle
from xjobs.declare.rate import job_scope
from xjobs.errors import JobTenantMismatchError


def tenant_of(handle: JobHandle[Any], value: Any, actor_org: str | None) -> str | None:
    """The org a job of `value` belongs to (`None` for a `tenant="none"` job): the namespace it is
    deduplicated in and the org its run acts for. An actor of another org may not enqueue it."""
    tenant = handle.tenant_for(value)
    if tenant is not None and actor_org is not None and tenant != actor_org:
        raise JobTenantMismatchError(
            f"job {handle.name!r}: its input belongs to org {tenant!r}, but the enqueue acts for "
            f"org {actor_org!r} (only a tenant='none' job is enqueued across orgs)"
        )
    return tenant


def admission_keys(handle: JobHandle[Any]) -> tuple[Callable[[Any], object], ...]:
    """The keys a worker derives from the input when it admits a run of `handle` (its concurrency
    key, each keyed rate's bucket), derived at enqueue too: an underivable one is refused there."""
    name = handle.name
    keys: list[Callable[[Any], object]] = []
    concurrency = handle.concurrency
    if concurrency is not None and concurrency.key is not None:
        keys.append(partial(concurrency.lease_key, name))
    for index, rate in enumerate(handle.rates):
        if rate.key is not None:
            keys.append(partial(rate.bucket, job_scope(name, index), job=name))
    return tuple(keys)
