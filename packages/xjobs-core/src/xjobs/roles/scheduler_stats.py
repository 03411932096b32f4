"""`SchedulerStats`: what one scheduler did while it ran, counted by round and fire."""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass
class SchedulerStats:
    """What one scheduler did while it ran."""

    scheduler_id: str
    rounds: int = 0
    fired: int = 0
    skipped: int = 0
    lost_races: int = 0
    input_failed: int = 0

    @property
    def role_id(self) -> str:
        """The id of the scheduler these counts belong to."""
        return self.scheduler_id

    def as_dict(self) -> dict[str, int]:
        """The counters by name (the scheduler id is not a count)."""
        counts = asdict(self)
        del counts["scheduler_id"]
        return counts
