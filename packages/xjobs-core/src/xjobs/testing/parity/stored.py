"""What a refusal scenario reads back to prove nothing was written: every job the backend holds."""

from __future__ import annotations

from xjobs.contract.introspection import JobFilter
from xjobs.testing.parity.env import ParityEnv

# More jobs than any refusal scenario enqueues: one page holds them all.
PAGE = 100


async def stored_ids(parity: ParityEnv) -> set[str]:
    """The ids of every job stored (mark the scenario `@pytest.mark.requires("introspection")`)."""
    jobs = await parity.introspection.list_jobs(JobFilter(), limit=PAGE, after=None)
    return {summary.id for summary in jobs}
