"""`RelayStats`: what one relay did while it ran, counted by pass and published row."""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass
class RelayStats:
    """What one relay did while it ran."""

    relay_id: str
    passes: int = 0
    published: int = 0
    deduped: int = 0
    lost: int = 0

    @property
    def role_id(self) -> str:
        """The id of the relay these counts belong to."""
        return self.relay_id

    def as_dict(self) -> dict[str, int]:
        """The counters by name (the relay id is not a count)."""
        counts = asdict(self)
        del counts["relay_id"]
        return counts
