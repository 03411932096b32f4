"""The long-running roles: the worker, the scheduler and the relay, with their options and stats."""
