"""xjobs-redis: the Redis backend for xjobs (its driver lands with the Redis issue)."""

__version__ = "0.1.0"
