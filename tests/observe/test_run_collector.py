"""The run path's own counts (observe/metrics.py) as exposed: the histograms' buckets (a value on a
bound counts in that bucket, cumulative, `+Inf` last), the settle outcomes, the running gauge."""

from __future__ import annotations

from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from xjobs.observe.metrics import DURATION_BUCKETS_S, Metrics


def _samples(metrics: Metrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = metrics.exposition()[0].decode()
    out: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


def _bucket(le: str) -> tuple[str, tuple[tuple[str, str], ...]]:
    labels = {"queue": "q", "job": "j", "le": le}
    return ("xjobs_job_duration_seconds_bucket", tuple(sorted(labels.items())))


def test_a_value_on_a_bound_counts_in_that_bucket_and_the_buckets_are_cumulative() -> None:
    metrics = Metrics()
    bound = metrics.job("q", "j")
    for value in (0.005, 0.006, 7.0, 4000.0):
        bound.duration.observe(value)
    samples = _samples(metrics)
    assert samples[_bucket("0.005")] == 1
    assert samples[_bucket("0.01")] == 2
    assert samples[_bucket("5.0")] == 2
    assert samples[_bucket("10.0")] == 3
    assert samples[_bucket("3600.0")] == 3
    assert samples[_bucket("+Inf")] == 4
    labels = (("job", "j"), ("queue", "q"))
    assert samples[("xjobs_job_duration_seconds_count", labels)] == 4
    assert samples[("xjobs_job_duration_seconds_sum", labels)] == 0.005 + 0.006 + 7.0 + 4000.0
    buckets = [k for k in samples if k[0] == "xjobs_job_duration_seconds_bucket"]
    assert len(buckets) == len(DURATION_BUCKETS_S) + 1


def test_outcomes_are_counted_under_their_label_and_the_gauge_follows_the_runs() -> None:
    metrics = Metrics()
    first, second = metrics.job("q", "j"), metrics.job("q", "k")
    assert first.running is second.running  # one gauge per queue
    first.running.inc()
    second.running.inc()
    first.running.dec()
    for outcome in ("completed", "completed", "dead-lettered", "retried"):
        metrics.settled("q", "j", outcome)
    samples = _samples(metrics)
    assert samples[("xjobs_jobs_running", (("queue", "q"),))] == 1

    def settled(outcome: str) -> Any:
        labels = (("job", "j"), ("outcome", outcome), ("queue", "q"))
        return samples[("xjobs_jobs_settled_total", labels)]

    assert (settled("completed"), settled("dead"), settled("retried")) == (2, 1, 1)
