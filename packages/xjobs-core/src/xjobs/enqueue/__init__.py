"""Enqueue: the one path from an input to a stored job (direct, bulk, or staged in an outbox)."""
