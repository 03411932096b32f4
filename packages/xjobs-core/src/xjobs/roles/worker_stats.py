"""`WorkerStats`: what one worker did, counted by settle outcome."""

from __future__ import annotations

from dataclasses import dataclass, field, fields

from xjobs.contract.driver import Outcome

_FIELD_OF: dict[str, str] = {
    "completed": "completed",
    "retried": "retried",
    "dead-lettered": "dead_lettered",
    "dropped": "dropped",
    "refused": "refused",
    "cancelled": "cancelled",
    "shed": "shed",
    "deferred": "deferred",
    "suspended": "suspended",
    "interrupted": "interrupted",
    "handed-back": "handed_back",
    "lease-lost": "lease_lost",
}


@dataclass
class WorkerStats:
    """Counts since the worker started: jobs claimed, buried by the claim, and each settle outcome."""

    worker_id: str = field(default="", compare=False)
    claimed: int = 0
    buried: int = 0
    handed_back: int = 0
    completed: int = 0
    retried: int = 0
    dead_lettered: int = 0
    dropped: int = 0
    refused: int = 0
    cancelled: int = 0
    shed: int = 0
    deferred: int = 0
    suspended: int = 0
    interrupted: int = 0
    lease_lost: int = 0

    @property
    def role_id(self) -> str:
        """The id of the worker these counts belong to."""
        return self.worker_id

    def count(self, outcome: Outcome) -> None:
        """Count one settle of the run by its outcome."""
        name = _FIELD_OF[outcome]
        setattr(self, name, getattr(self, name) + 1)

    def as_dict(self) -> dict[str, int]:
        """The counters by name (the worker id is not a count)."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "worker_id"}
