"""The dashboard's parts without a server: options, the basic-auth hook, CSRF tokens, the step
timeline, failure groups, the throughput chart; and the coded refusal when xjobs-web is absent."""

from __future__ import annotations

import base64
import json
import sys
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request

import xjobs
from xjobs import JobRecord, StepRecord
from xjobs.contract.introspection import MINUTE_MS, AttemptError, CounterBucket, JobSummary
from xjobs_cli.main import main
from xjobs_web import basic_auth, csrf, dashboard
from xjobs_web.chart import throughput_svg
from xjobs_web.errors import DashboardOptionInvalidError
from xjobs_web.failures import group, split_error
from xjobs_web.hosts import Hosts, is_loopback
from xjobs_web.options import resolve_options
from xjobs_web.overview import minute_bars
from xjobs_web.timeline import step_kind, timeline


def _request(headers: dict[str, str]) -> Request:
    raw = [(k.lower().encode(), v.encode()) for k, v in headers.items()]
    return Request({"type": "http", "method": "GET", "path": "/", "headers": raw})


# -- options and hooks ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "options",
    [
        {"read_only": "yes"},
        {"auth": "admin:admin"},
        {"tenant": 42},
        {"title": ""},
        {"refresh_seconds": -1},
        {"refresh_seconds": True},
        {"csrf_secret": b"short"},
        {"colour": "red"},
        {"unsafe_no_auth": 1},
        {"allowed_hosts": "jobs.example.com"},
        {"allowed_hosts": ["jobs example com"]},
        {"allowed_hosts": [42]},
    ],
)
def test_a_bad_option_is_refused_with_its_code(options: dict[str, Any]) -> None:
    with pytest.raises(DashboardOptionInvalidError) as refused:
        resolve_options({"unsafe_no_auth": True, **options})
    assert refused.value.code == "XJOBS_DASHBOARD_OPTION_INVALID"


def test_basic_auth_admits_only_its_user() -> None:
    check = basic_auth("ops", "pa:ss")

    def header(user_pass: str) -> dict[str, str]:
        return {"Authorization": "Basic " + base64.b64encode(user_pass.encode()).decode()}

    assert check(_request(header("ops:pa:ss"))) is True
    assert check(_request(header("ops:pa"))) is False
    assert check(_request({"Authorization": "Basic !!!"})) is False
    assert check(_request({"Authorization": "Bearer x"})) is False
    assert check(_request({})) is False
    with pytest.raises(DashboardOptionInvalidError):
        basic_auth("a:b", "c")


def test_a_csrf_token_is_bound_to_its_cookie_its_identity_and_secret() -> None:
    nonce = csrf.new_nonce()
    alice = {"Cookie": f"{csrf.COOKIE}={nonce}", "Authorization": "Basic YWxpY2U6cHc="}
    with_cookie = _request(alice)
    token = csrf.token(b"k" * 32, csrf.bound(nonce, with_cookie))
    assert csrf.valid(b"k" * 32, with_cookie, token, secure=False)
    assert not csrf.valid(b"j" * 32, with_cookie, token, secure=False)
    assert not csrf.valid(b"k" * 32, with_cookie, None, secure=False)
    assert not csrf.valid(b"k" * 32, _request({}), token, secure=False)
    other = _request({**alice, "Cookie": f"{csrf.COOKIE}={csrf.new_nonce()}"})
    assert not csrf.valid(b"k" * 32, other, token, secure=False)
    # the same cookie with another user's credentials
    mallory = _request({**alice, "Authorization": "Basic bWFsbG9yeTpwdw=="})
    assert not csrf.valid(b"k" * 32, mallory, token, secure=False)
    # a secure dashboard reads only the __Host- cookie
    assert not csrf.valid(b"k" * 32, with_cookie, token, secure=True)
    hosted = _request({**alice, "Cookie": f"{csrf.SECURE_COOKIE}={nonce}"})
    assert csrf.valid(b"k" * 32, hosted, token, secure=True)


@pytest.mark.parametrize(
    ("host", "admitted"),
    [
        ("localhost:8080", True),
        ("127.0.0.1:8080", True),
        ("[::1]:8080", True),
        ("LocalHost.:8080", True),
        ("jobs.internal", True),
        ("jobs.internal:443", True),
        ("localhost", False),  # port 80, not the port served
        ("localhost:8081", False),
        ("evil.example:8080", False),
        ("jobs.internal.evil.example", False),
        ("127.0.0.2:8080", False),
        ("localhost:8080@evil.example", False),
        ("", False),
        (None, False),
    ],
)
def test_hosts_admit_loopback_names_on_the_port_and_the_allowed_names(
    host: str | None, admitted: bool
) -> None:
    assert Hosts.of(["jobs.internal"], 8080).admit(host) is admitted


def test_a_mounted_dashboards_loopback_names_take_any_port_and_star_takes_any_host() -> None:
    assert Hosts.of([], None).admit("localhost:5000")
    assert not Hosts.of([], None).admit("evil.example")
    assert Hosts.of(["*"], None).admit("evil.example")


@pytest.mark.parametrize(
    ("bind", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.8.0.1", True),
        ("::1", True),
        ("localhost", True),
        ("0.0.0.0", False),
        ("::", False),
        ("10.0.0.5", False),
        ("jobs.internal", False),
    ],
)
def test_only_a_loopback_bind_is_loopback(bind: str, loopback: bool) -> None:
    assert is_loopback(bind) is loopback


# -- the timeline -----------------------------------------------------------------------------------


def _step(position: int, name: str, at: int, result: Any, status: str = "done") -> StepRecord:
    return StepRecord("run-1", name, status, json.dumps(result), None, position, at)  # type: ignore[arg-type]


def _record(finished: int | None, state: str = "completed") -> JobRecord:
    return JobRecord(
        id="j",
        run_id="run-1",
        name="export",
        queue="reports",
        state=state,  # type: ignore[arg-type]
        tenant_id=None,
        idempotency_key="k",
        payload="{}",
        priority=0,
        attempt=1,
        max_attempts=3,
        dead_letter=True,
        claims=2,
        claimed_by=None,
        lease_until_ms=None,
        run_at_ms=0,
        created_at_ms=0,
        updated_at_ms=0,
        finished_at_ms=finished,
        last_error=None,
        progress=None,
        enqueued_by=None,
        traceparent=None,
    )


def test_steps_are_run_sleep_or_wait_by_what_they_recorded() -> None:
    assert step_kind(_step(0, "a", 1, {"rows": 3})) == "run"
    assert step_kind(_step(0, "a", 1, {"wake_at_ms": 5})) == "sleep"
    assert step_kind(_step(0, "a", 1, {"event_id": "e", "payload": {}})) == "wait"
    pending = {"event": "paid", "match": "{}", "since_ms": 1, "deadline_ms": None}
    assert step_kind(_step(0, "a", 1, pending, "pending")) == "wait"


def test_a_step_is_replayed_when_the_body_ran_again_after_it() -> None:
    steps = [
        _step(0, "gather", 100, {"rows": 1}),
        _step(1, "nap", 110, {"wake_at_ms": 500}),
        _step(2, "upload", 600, {"ok": True}),
    ]
    # the sleep suspended the run; the next execution replayed gather and the nap
    shown = timeline(_record(650), steps, [])
    assert [(s.kind, s.replayed) for s in shown] == [("run", True), ("sleep", True), ("run", False)]
    # still asleep: nothing ran after the nap yet
    asleep = timeline(_record(None, "ready"), steps[:2], [])
    assert [s.replayed for s in asleep] == [False, False]
    # an attempt that failed after gather, then a retry that finished: gather was replayed
    error = AttemptError("j", 1, "w", 200, "TimeoutError: slow\n  tb")
    retried = timeline(_record(300), steps[:1], [error])
    assert [s.replayed for s in retried] == [True]
    assert [s.replayed for s in timeline(_record(None, "dead"), steps[:1], [error])] == [False]


# -- failures and the chart -------------------------------------------------------------------------


def _summary(job_id: str, name: str, error: str | None, at: int) -> JobSummary:
    return JobSummary(
        id=job_id,
        name=name,
        queue="q",
        state="dead",
        tenant_id=None,
        priority=0,
        attempt=1,
        max_attempts=1,
        run_at_ms=0,
        created_at_ms=at,
        updated_at_ms=at,
        finished_at_ms=at,
        claimed_by=None,
        progress=None,
        last_error=error,
    )


def test_failures_group_by_class_and_message_largest_first() -> None:
    assert split_error("KeyError: 'x'\n  File …") == ("KeyError", "'x'")
    assert split_error("Boom") == ("Boom", "")
    assert split_error(None) == ("(no error recorded)", "")
    groups = group(
        [
            _summary("1", "export", "TimeoutError: slow\ntb", 10),
            _summary("2", "mail", "KeyError: 'to'", 20),
            _summary("3", "import", "TimeoutError: slow\nother tb", 30),
        ]
    )
    assert [(g.error_class, g.ids, sorted(g.names), g.newest_ms) for g in groups] == [
        ("TimeoutError", ["1", "3"], ["export", "import"], 30),
        ("KeyError", ["2"], ["mail"], 20),
    ]


def test_minute_bars_put_each_bucket_in_its_minute_and_split_completed_from_failed() -> None:
    now = 100 * MINUTE_MS + 30_000
    buckets = [
        CounterBucket("minute", 100 * MINUTE_MS, "a", "completed", 4),
        CounterBucket("minute", 100 * MINUTE_MS, "b", "dead-lettered", 1),
        CounterBucket("minute", 99 * MINUTE_MS, "a", "retried", 2),
        CounterBucket("minute", 99 * MINUTE_MS, "a", "cancelled", 7),  # neither
        CounterBucket("minute", 10 * MINUTE_MS, "a", "completed", 9),  # before the hour
    ]
    bars = minute_bars(buckets, now, minutes=3)
    assert [(b.start_ms // MINUTE_MS, b.completed, b.failed) for b in bars] == [
        (98, 0, 0),
        (99, 0, 2),
        (100, 4, 1),
    ]
    svg = throughput_svg(bars)
    assert svg.startswith("<svg")
    assert svg.count('class="ok"') == 1
    assert svg.count('class="bad"') == 2
    assert "peak 5/min" in svg


# -- the distribution is optional -------------------------------------------------------------------


def test_the_dashboard_is_an_asgi_app_built_before_the_app_opens() -> None:
    app = xjobs.App("memory://")
    assert isinstance(dashboard(app, read_only=True, auth=basic_auth("ops", "pw")), Starlette)
    with pytest.raises(DashboardOptionInvalidError):
        dashboard(app, refresh_seconds=0.5, unsafe_no_auth=True)


def test_without_xjobs_web_the_commands_are_a_coded_refusal(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in ("xjobs_web", "xjobs_web.serve", "xjobs_web.mcp_server"):
        monkeypatch.setitem(sys.modules, name, None)
    for verb in ("web", "mcp"):
        capsys.readouterr()
        assert main([verb, "--url", "memory://"]) == 2
        last = capsys.readouterr().err.strip().splitlines()[-1]
        assert last.startswith("error: XJOBS_EXTRA_MISSING: ")
        assert "pip install xjobs-web" in last
