"""The shipped Grafana dashboard and Prometheus alert rules (docs/grafana/) name only metrics xjobs exposes."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml
from prometheus_client.parser import text_string_to_metric_families

from xjobs.observe.metrics import METRIC_ALIASES, METRIC_NAMES, Metrics

GRAFANA = Path(__file__).parents[2] / "docs" / "grafana"
METRIC = re.compile(r"\bxjobs_[a-z_]+")
SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_count", "_sum"), "gauge": ("",)}


def exposed() -> set[str]:
    """Every sample name a `Metrics` registry exposes, by each family's type."""
    body, _ = Metrics().exposition()
    names: set[str] = set()
    for family in text_string_to_metric_families(body.decode()):
        names.update(family.name + suffix for suffix in SUFFIXES[family.type])
    return names


def dashboard_exprs() -> list[str]:
    board: dict[str, Any] = json.loads((GRAFANA / "xjobs-dashboard.json").read_text())
    exprs = [target["expr"] for panel in board["panels"] for target in panel["targets"]]
    exprs += [variable["definition"] for variable in board["templating"]["list"]]
    return exprs


def alert_rules() -> list[dict[str, Any]]:
    rules: dict[str, Any] = yaml.safe_load((GRAFANA / "alerts.yml").read_text())
    return [rule for group in rules["groups"] for rule in group["rules"]]


def test_every_metric_the_dashboard_queries_is_exposed() -> None:
    named = {m for expr in dashboard_exprs() for m in METRIC.findall(expr)}
    assert named, "the dashboard queries no xjobs metric"
    assert named - exposed() == set()


def test_every_metric_an_alert_rule_reads_is_exposed() -> None:
    named = {m for rule in alert_rules() for m in METRIC.findall(rule["expr"])}
    assert named
    assert named - exposed() == set()


def test_the_alert_rules_cover_dead_jobs_queue_age_workers_and_the_leader() -> None:
    names = {rule["alert"] for rule in alert_rules()}
    assert {
        "XJobsDeadJobsRising",
        "XJobsOldestReadyTooOld",
        "XJobsNoWorkerAlive",
        "XJobsSchedulerLeaderMissing",
    } <= names
    assert all(rule["annotations"]["summary"] for rule in alert_rules())


def test_the_dashboard_shows_every_metric_xjobs_exposes() -> None:
    shown = {m for expr in dashboard_exprs() for m in METRIC.findall(expr)}
    families = {re.sub(r"_(total|bucket|count|sum)$", "", m) for m in shown}
    current = [m for m in METRIC_NAMES if m not in METRIC_ALIASES]
    assert {re.sub(r"_total$", "", m) for m in current} - families == set()
    assert families & set(METRIC_ALIASES) == set()  # the dashboard reads the current names


def test_the_documented_metric_names_are_the_exposed_ones() -> None:
    body, _ = Metrics().exposition()
    families = {family.name for family in text_string_to_metric_families(body.decode())}
    assert families == {re.sub(r"_total$", "", m) for m in METRIC_NAMES}
