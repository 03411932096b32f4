"""What the memory driver records beside its rows: counters, attempt errors, and pauses."""

from __future__ import annotations

from collections import defaultdict, deque

from xjobs.contract.introspection import (
    COUNTED_OUTCOMES,
    MAX_ERROR_HISTORY,
    AttemptError,
    CounterBucket,
    CounterTier,
    Pause,
    PauseKind,
    bucket_of,
)

_Key = tuple[int, str, str]  # (bucket_ms, name, outcome)


class MemoryLedger:
    """Minute counters (folded into hours and days), each job's attempt errors, and pause rows."""

    def __init__(self) -> None:
        self._tiers: dict[CounterTier, dict[_Key, int]] = {
            "minute": defaultdict(int),
            "hour": defaultdict(int),
            "day": defaultdict(int),
        }
        self._folded: set[int] = set()  # minute buckets already folded
        self._errors: dict[str, deque[AttemptError]] = {}
        self._pauses: dict[tuple[PauseKind, str], int] = {}

    # -- counters ---------------------------------------------------------------------------------

    def count(self, name: str, outcome: str, now_ms: int, n: int = 1) -> None:
        """Move the minute counter of one ending; an outcome that is not counted adds nothing."""
        if outcome in COUNTED_OUTCOMES:
            self._tiers["minute"][(bucket_of(now_ms), name, outcome)] += n

    def buckets(self, tier: CounterTier, since_ms: int) -> list[CounterBucket]:
        """The buckets of `tier` starting at or after `since_ms`, by bucket, name, outcome."""
        return [
            CounterBucket(tier, bucket, name, outcome, count)
            for (bucket, name, outcome), count in sorted(self._tiers[tier].items())
            if bucket >= since_ms and count > 0
        ]

    def rollup(self, now_ms: int) -> int:
        """Fold every closed minute bucket into its hour and day, once."""
        current = bucket_of(now_ms)
        closed = sorted(
            {b for (b, _, _) in self._tiers["minute"] if b < current and b not in self._folded}
        )
        for bucket in closed:
            for (b, name, outcome), count in list(self._tiers["minute"].items()):
                if b == bucket:
                    self._tiers["hour"][(bucket_of(b, "hour"), name, outcome)] += count
                    self._tiers["day"][(bucket_of(b, "day"), name, outcome)] += count
            self._folded.add(bucket)
        return len(closed)

    def purgeable(self, tier: CounterTier, before_ms: int) -> list[_Key]:
        """The buckets of `tier` starting before `before_ms` a purge may drop, oldest first (a
        minute bucket only once it is folded into its hour and day)."""
        return sorted(
            key
            for key in self._tiers[tier]
            if key[0] < before_ms and (tier != "minute" or key[0] in self._folded)
        )

    def purge(self, tier: CounterTier, before_ms: int, limit: int) -> int:
        """Drop at most `limit` purgeable buckets of `tier`; the folded marks of dropped minutes go
        once none of their rows is left."""
        doomed = self.purgeable(tier, before_ms)[:limit]
        for key in doomed:
            del self._tiers[tier][key]
        if tier == "minute":
            left = {b for (b, _, _) in self._tiers["minute"]}
            self._folded -= {b for (b, _, _) in doomed if b not in left}
        return len(doomed)

    # -- attempt errors ---------------------------------------------------------------------------

    def record_error(self, error: AttemptError) -> None:
        """Keep one attempt's error; past `MAX_ERROR_HISTORY` the oldest goes."""
        history = self._errors.setdefault(error.job_id, deque(maxlen=MAX_ERROR_HISTORY))
        history.append(error)

    def errors(self, job_id: str) -> list[AttemptError]:
        """A job's stored attempt errors, oldest first."""
        return list(self._errors.get(job_id, ()))

    def forget(self, job_id: str) -> None:
        """Drop a removed job's errors."""
        self._errors.pop(job_id, None)

    # -- pauses -----------------------------------------------------------------------------------

    def pause(self, kind: PauseKind, name: str, now_ms: int) -> bool:
        """Write a pause row; answers whether it was not paused."""
        if (kind, name) in self._pauses:
            return False
        self._pauses[(kind, name)] = now_ms
        return True

    def resume(self, kind: PauseKind, name: str) -> bool:
        """Delete a pause row; answers whether it was paused."""
        return self._pauses.pop((kind, name), None) is not None

    def pauses(self) -> list[Pause]:
        """Every pause row, by kind then name."""
        return [Pause(kind, name, at) for (kind, name), at in sorted(self._pauses.items())]

    def paused(self, kind: PauseKind, name: str) -> bool:
        """Whether a queue (or a job name) is paused: the claim reads this."""
        return bool(self._pauses) and (kind, name) in self._pauses
