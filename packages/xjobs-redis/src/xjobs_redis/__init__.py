"""xjobs-redis: the Redis backend for xjobs (job driver, worker registry, fleet lease store)."""

__version__ = "0.1.0"
