"""Telemetry: the one instrumentation seam (`Observer`), Prometheus metrics, OpenTelemetry spans, health, JSON logs."""
