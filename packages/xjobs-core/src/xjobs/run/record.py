"""One claimed job as a run knows it: the input decoded once, the tenant derived once, the claim."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from xjobs.contract.driver import Claim, ClaimedJob
from xjobs.declare.job import JobHandle
from xjobs.errors import XJobsError
from xjobs.payload import decode_input


@dataclass(frozen=True, slots=True)
class RunRecord:
    """What admission, execution and settlement share: decoded once per run, never again.

    `refusal` is why the input or the tenant could not be derived; the attempt then fails with it
    and the body never runs. `handle` is `None` for a row whose job this process does not know.
    `claim` is the fence every settle of this run carries, built once from the job (by `open`).
    """

    job: ClaimedJob
    handle: JobHandle[Any] | None
    claim: Claim = field(repr=False, compare=False)
    value: Any = None
    tenant: str | None = None
    refusal: XJobsError | None = None

    @property
    def step_timeout_ms(self) -> int | None:
        """The job's `step_timeout`, in ms (`None`: none, or a job this process does not know)."""
        return None if self.handle is None else self.handle.step_timeout_ms

    @classmethod
    def open(cls, handle: JobHandle[Any] | None, job: ClaimedJob) -> RunRecord:
        """Decode the payload and derive the tenant once; a refusal is kept, never raised."""
        claim = job.claim
        if handle is None:
            return cls(job, None, claim)
        try:
            value = decode_input(handle.input_model, job.payload, job=handle.name)
        except XJobsError as exc:
            return cls(job, handle, claim, refusal=exc)
        try:
            tenant = handle.tenant_for(value)
        except XJobsError as exc:
            return cls(job, handle, claim, value, refusal=exc)
        return cls(job, handle, claim, value, tenant)

    @staticmethod
    def tenant_of(handle: JobHandle[Any] | None, payload: str) -> str | None:
        """A tenant for an announcement of a row that never ran here, best effort."""
        if handle is None:
            return None
        try:
            return handle.tenant_for(handle.input_model.model_validate_json(payload))
        except Exception:
            return None
