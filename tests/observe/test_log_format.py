"""`--log-format json`: one JSON object a line — ts, level, the event name, and the record's fields."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from xjobs.observe.log_format import JsonFormatter
from xjobs_cli.logs import configure_logging

from .process import start_worker


def _record(exc: BaseException | None = None) -> logging.LogRecord:
    record = logging.getLogger("xjobs.run.settle").makeRecord(
        "xjobs.run.settle",
        logging.WARNING,
        __file__,
        1,
        "jobs.settle.unowned",
        (),
        None if exc is None else (type(exc), exc, exc.__traceback__),
        extra={
            "job_id": "j-1",
            "job": "send",
            "queue": "billing",
            "attempt": 2,
            "outcome": "completed",
        },
    )
    record.created = 1_767_225_600.25
    return record


def test_a_record_is_one_json_object_with_its_event_and_fields() -> None:
    line = JsonFormatter().format(_record())
    assert "\n" not in line
    assert json.loads(line) == {
        "ts": "2026-01-01T00:00:00.250+00:00",
        "level": "WARNING",
        "logger": "xjobs.run.settle",
        "event": "jobs.settle.unowned",
        "job_id": "j-1",
        "job": "send",
        "queue": "billing",
        "attempt": 2,
        "outcome": "completed",
    }


def test_an_exception_is_one_field_of_the_same_line() -> None:
    try:
        raise RuntimeError("the store went away")
    except RuntimeError as exc:
        line = JsonFormatter().format(_record(exc))
    document = json.loads(line)
    assert document["event"] == "jobs.settle.unowned"
    assert document["exc"].endswith("RuntimeError: the store went away")


def test_configure_logging_json_writes_json_lines_to_stderr(
    capsys: pytest.CaptureFixture[str],
) -> None:
    configure_logging("INFO", "json")
    try:
        logging.getLogger("xjobs.roles.worker").info(
            "jobs.worker.started", extra={"worker_id": "w-1"}
        )
    finally:
        configure_logging("WARNING")
    (line,) = capsys.readouterr().err.splitlines()
    assert json.loads(line)["event"] == "jobs.worker.started"
    assert json.loads(line)["worker_id"] == "w-1"


def test_a_worker_process_with_log_format_json_writes_only_json_lines(tmp_path: Path) -> None:
    worker = start_worker("memory://", tmp_path, "--health-port", "PORT", "--log-format", "json")
    log = worker.stop()
    documents = [json.loads(line) for line in log.splitlines()]
    events = [d["event"] for d in documents]
    assert "jobs.worker.started" in events, log
    assert any(e.startswith("worker stopped:") for e in events), log
    started = next(d for d in documents if d["event"] == "jobs.worker.started")
    assert started["queues"] == "obs"
    assert started["backend"] == "memory"
    assert worker.process.returncode == 0, log
