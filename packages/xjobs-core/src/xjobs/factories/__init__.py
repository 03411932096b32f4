"""Factories: functions that return a `JobHandle` built with `job()` and durable steps, nothing else."""
