"""Declarations: `job()` and `task()`, what they resolve once (tenant, keys, retry, concurrency), the registry."""
