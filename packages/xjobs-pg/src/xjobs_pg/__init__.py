"""xjobs-pg: the Postgres backend for xjobs (its driver lands with the Postgres issue)."""

__version__ = "0.1.0"
