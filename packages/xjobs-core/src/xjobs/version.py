"""The version of xjobs-core, a foundation every layer may read (tracing names its tracer by it)."""

__version__ = "0.1.0"
