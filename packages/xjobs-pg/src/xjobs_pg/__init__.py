"""xjobs-pg: the Postgres backend for xjobs, and the leaders a scheduler may elect with."""

from xjobs_pg.backend import postgres_advisory_leader
from xjobs_pg.scheduler import PostgresAdvisoryLeader, PostgresLeaseLeader

__version__ = "0.1.0"
__all__ = [
    "PostgresAdvisoryLeader",
    "PostgresLeaseLeader",
    "__version__",
    "postgres_advisory_leader",
]
