"""xjobs-redis: the Redis backend for xjobs (job driver, worker registry, fleet slot store, and more)."""

__version__ = "0.1.0"
