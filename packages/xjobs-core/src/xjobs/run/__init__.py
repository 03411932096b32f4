"""One run: admission, execution, steps, heartbeats, and the settle room where every run ends."""
