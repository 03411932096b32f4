"""The rows a child step writes: each child's id derived from the parent run, the step and its
index (a replay spawns nothing twice), its input checked and its tenant the parent's, before any
row is written."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any, Final

from xjobs.actor import current_actor, traceparent_for_enqueue
from xjobs.contract.children import MAX_GROUP_CHILDREN
from xjobs.contract.driver import NewJob
from xjobs.declare.job import JobHandle
from xjobs.errors import ChildrenInvalidError, ChildTenantMismatchError
from xjobs.ids import new_id
from xjobs.payload import DEFAULT_MAX_PAYLOAD_BYTES, encode_payload, validate_input

# The index takes 17 bits of the id (up to 131,072 children a step, over MAX_GROUP_CHILDREN).
_INDEX_BITS: Final = 17
_HASH_BITS: Final = 62 - (_INDEX_BITS - 12)
assert 1 << _INDEX_BITS > MAX_GROUP_CHILDREN


def child_id(parent_run_id: str, step: str, index: int) -> str:
    """The id of the `index`-th child of `step` in the run `parent_run_id`: the same on every replay.

    A UUID of version 8 (RFC 9562, custom): the parent run id's 48-bit timestamp first, then the
    index, then a hash of the run and the step — so the children of one step sort (and, at one
    priority and due time, are claimed) in index order.
    """
    ms = int(parent_run_id.replace("-", "")[:12], 16)
    digest = hashlib.blake2b(f"{parent_run_id}\x00{step}".encode(), digest_size=8).digest()
    mixed = int.from_bytes(digest) & ((1 << _HASH_BITS) - 1)
    high, low = index >> (_INDEX_BITS - 12), index & ((1 << (_INDEX_BITS - 12)) - 1)
    value = ms << 80 | 0x8 << 76 | high << 64 | 0x2 << 62 | low << _HASH_BITS | mixed
    h = value.to_bytes(16).hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def checked_handle(handle: object, step: str) -> JobHandle[Any]:
    """`handle` when it is a job handle; refused otherwise."""
    if not isinstance(handle, JobHandle):
        raise ChildrenInvalidError(f"step {step!r} needs a job() handle to spawn, got {handle!r}")
    return handle


def checked_count(count: int, step: str) -> int:
    """How many children a step spawns, refused over `MAX_GROUP_CHILDREN`."""
    if count > MAX_GROUP_CHILDREN:
        raise ChildrenInvalidError(
            f"step {step!r} would spawn {count} children; a step holds at most "
            f"{MAX_GROUP_CHILDREN} (split the fan-out into several steps)"
        )
    return count


class ChildRows:
    """Builds the rows of one step's children: every input validated and its tenant checked
    against the parent run's first (`check`), then each page encoded as it is written (`page`)."""

    def __init__(
        self, handle: JobHandle[Any], parent_run_id: str, step: str, parent_tenant: str | None
    ) -> None:
        self._handle = handle
        self._run_id = parent_run_id
        self._step = step
        self._tenant = parent_tenant

    def check(self, inputs: Sequence[object]) -> list[Any]:
        """Each input validated with the child's model and owned by the parent's tenant; a
        refusal names the first input at fault, and nothing is written."""
        handle, values = self._handle, []
        for index, raw in enumerate(inputs):
            value = validate_input(handle.input_model, raw, job=handle.name)
            tenant = handle.tenant_for(value)
            if self._tenant is not None and tenant != self._tenant:
                raise ChildTenantMismatchError(
                    f"step {self._step!r}: child {index} of job {handle.name!r} belongs to "
                    f"{'no tenant' if tenant is None else f'org {tenant!r}'}, but the parent run "
                    f"acts for org {self._tenant!r} (children inherit the parent's tenant)"
                )
            values.append(value)
        return values

    def page(self, values: Sequence[Any], first_index: int) -> list[NewJob]:
        """The rows of `values`, the first at `first_index`."""
        handle = self._handle
        actor = current_actor()
        enqueued_by = actor.id if actor is not None else None
        traceparent = traceparent_for_enqueue()
        rows: list[NewJob] = []
        for offset, value in enumerate(values):
            job_id = child_id(self._run_id, self._step, first_index + offset)
            rows.append(
                NewJob(
                    job_id,
                    new_id(),
                    handle.name,
                    handle.queue,
                    handle.tenant_for(value),
                    f"child:{job_id}",
                    encode_payload(value, job=handle.name, max_bytes=DEFAULT_MAX_PAYLOAD_BYTES),
                    handle.priority,
                    None,
                    handle.retry.attempts,
                    handle.retry.dead_letter,
                    enqueued_by,
                    traceparent,
                )
            )
        return rows
