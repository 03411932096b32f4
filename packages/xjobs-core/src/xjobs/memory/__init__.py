"""The memory backend: the reference implementation of every driver rule, in one process."""
