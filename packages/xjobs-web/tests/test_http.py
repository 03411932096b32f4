"""The dashboard over HTTP (uvicorn, the memory backend): CSRF, read-only mode, the basic-auth
hook and the tenant hook, each checked against what the backend then holds (the attacks on them:
test_security_*.py)."""

from __future__ import annotations

import base64
import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from starlette.requests import Request

from xjobs import JobFilter
from xjobs_web import ALL_TENANTS, AllTenants, basic_auth, basic_auth_users, basic_user

if TYPE_CHECKING:
    from conftest import Http, Serve, Served

Token = Callable[[str], str]


def _dead_export(s: Served, org: str, report: str) -> str:
    """An export that fails once and ends dead; its job id."""
    s.module.FAILING.add(report)
    job_id = s.as_org(org, s.module.export.enqueue(s.module.Export(org=org, report=report))).job_id
    s.work()
    s.module.FAILING.discard(report)
    return str(job_id)


def _state(s: Served, job_id: str) -> str:
    return str(s.call(s.app.get_job(job_id)).state)


def socket_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


# -- CSRF -------------------------------------------------------------------------------------------


def test_an_action_without_the_csrf_token_is_refused_and_changes_nothing(
    memory_served: Served, client: type[Http], token_of: Token
) -> None:
    job_id = _dead_export(memory_served, "acme", "csrf-1")
    http = client(memory_served.url(""))
    form = [("verb", "retry"), ("scope", "ids"), ("id", job_id), ("confirmed", "1")]
    form.append(("next", f"/jobs/{job_id}"))

    status, _, body = http.post("/act", form)
    assert status == 403
    assert "XJOBS_ACTION_REFUSED" in body
    # a token of another browser (no cookie of its own) is refused too
    page = client(memory_served.url("")).get(f"/jobs/{job_id}")[1]
    status, _, _ = http.post("/act", [*form, ("csrf", token_of(page))])
    assert status == 403
    assert _state(memory_served, job_id) == "dead"

    # the same form with the token of this browser's own cookie moves the job
    status, page = http.get(f"/jobs/{job_id}")
    assert status == 200
    status, headers, _ = http.post("/act", [*form, ("csrf", token_of(page))])
    assert status == 303
    assert headers["location"].startswith(f"/jobs/{job_id}?notice=retried+1+of+1")
    assert _state(memory_served, job_id) == "ready"


def test_a_bulk_move_is_confirmed_first_with_how_many_it_moves(
    memory_served: Served, client: type[Http], token_of: Token
) -> None:
    s = memory_served
    mails = [s.module.Mail(to=f"bulk{i}@example.com") for i in range(3)]
    s.as_org(None, s.module.send_mail.enqueue_many(mails, delay=3600))
    http = client(s.url(""))
    token = token_of(http.get("/jobs?queue=mail&state=ready")[1])
    form = [
        ("csrf", token),
        ("verb", "cancel"),
        ("scope", "filter"),
        ("queue", "mail"),
        ("state", "ready"),
    ]

    status, _, body = http.post("/act", form)
    assert status == 200
    assert "Cancel 3 jobs?" in body
    ready = JobFilter(states=("ready",), queue="mail")
    assert len(s.call(s.app.operator.list_jobs(ready)).jobs) == 3

    status, _, _ = http.post("/act", [*form, ("confirmed", "1")])
    assert status == 303
    assert s.call(s.app.operator.list_jobs(ready)).jobs == ()
    cancelled = s.call(s.app.operator.list_jobs(JobFilter(states=("cancelled",), queue="mail")))
    assert len(cancelled.jobs) == 3


def test_a_redirect_stays_inside_the_dashboard(
    memory_served: Served, client: type[Http], token_of: Token
) -> None:
    http = client(memory_served.url(""))
    token = token_of(http.get("/")[1])
    form = [("csrf", token), ("kind", "queue"), ("name", "mail"), ("op", "pause")]
    status, headers, _ = http.post("/pause", [*form, ("next", "//evil.example/")])
    assert status == 303
    assert headers["location"].startswith("/?notice=")
    assert memory_served.call(memory_served.app.operator.resume("queue", "mail"))


# -- read-only --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def read_only(serve: Serve) -> Iterator[Served]:
    with serve("memory", read_only=True) as s:
        yield s


ACTIONS = [
    ("/act", [("verb", "retry"), ("scope", "ids"), ("id", "{job}"), ("confirmed", "1")]),
    ("/act", [("verb", "remove"), ("scope", "filter"), ("state", "dead"), ("confirmed", "1")]),
    ("/pause", [("kind", "queue"), ("name", "reports"), ("op", "pause")]),
    ("/pause", [("kind", "job"), ("name", "export"), ("op", "pause")]),
    ("/task", [("name", "nightly"), ("op", "trigger")]),
    ("/task", [("name", "nightly"), ("op", "pause")]),
]


def test_read_only_renders_no_action_and_refuses_every_one_with_403(
    read_only: Served, client: type[Http]
) -> None:
    job_id = _dead_export(read_only, "acme", "ro-1")
    http = client(read_only.url(""))
    for path in ("/", "/jobs", f"/jobs/{job_id}", "/failures", "/tasks", "/workers"):
        status, page = http.get(path)
        assert status == 200, path
        assert 'method="post"' not in page, path
        assert "read-only" in page

    for path, form in ACTIONS:
        filled = [(k, v.replace("{job}", job_id)) for k, v in form]
        status, _, body = http.post(path, [("csrf", "x" * 64), *filled])
        assert status == 403, (path, form)
        assert "XJOBS_ACTION_REFUSED" in body

    op = read_only.app.operator
    assert _state(read_only, job_id) == "dead"
    assert not any(q.paused for q in read_only.call(op.queues()))
    assert read_only.call(op.pauses()) == []
    assert [t.paused for t in read_only.call(op.tasks())] == [False]
    assert len(read_only.call(op.list_jobs(JobFilter(name="export"))).jobs) == 1


# -- the auth hook ----------------------------------------------------------------------------------


def test_basic_auth_answers_401_with_a_challenge_until_the_right_user_comes(
    serve: Serve, client: type[Http]
) -> None:
    with serve("memory", auth=basic_auth("ops", "hunter2")) as s:
        status, headers, _ = client(s.url("")).request("GET", "/")
        assert status == 401
        assert headers["www-authenticate"].startswith("Basic realm=")

        def as_user(user: str, password: str) -> Http:
            token = base64.b64encode(f"{user}:{password}".encode()).decode()
            return client(s.url(""), {"Authorization": f"Basic {token}"})

        assert as_user("ops", "wrong").get("/jobs")[0] == 401
        assert as_user("root", "hunter2").get("/jobs")[0] == 401
        # an action is refused before its form is read
        assert as_user("ops", "nope").post("/pause", [("kind", "queue")])[0] == 401
        assert as_user("ops", "hunter2").get("/jobs")[0] == 200


def test_an_async_auth_hook_is_awaited(serve: Serve, client: type[Http]) -> None:
    async def header_key(request: Request) -> bool:
        return request.headers.get("x-key") == "k1"

    with serve("memory", auth=header_key) as s:
        assert client(s.url("")).get("/")[0] == 401
        assert client(s.url(""), {"X-Key": "k1"}).get("/")[0] == 200


# -- the tenant hook --------------------------------------------------------------------------------

USERS = {"acme-ops": "pw1", "admin": "pw2"}
ORGS: dict[str, str | AllTenants] = {"acme-ops": "acme", "admin": ALL_TENANTS}


def _basic(user: str) -> dict[str, str]:
    pair = f"{user}:{USERS[user]}".encode()
    return {"Authorization": "Basic " + base64.b64encode(pair).decode()}


def _org(request: Request) -> str | AllTenants | None:
    """The tenant of the authenticated user: acme-ops sees acme, admin every tenant."""
    return ORGS.get(basic_user(request) or "")


def test_the_tenant_hook_shows_and_steers_only_that_tenants_jobs(
    serve: Serve, client: type[Http], token_of: Token
) -> None:
    with serve("memory", auth=basic_auth_users(USERS), tenant=_org) as s:
        ours = _dead_export(s, "acme", "t-ours")
        theirs = _dead_export(s, "globex", "t-theirs")
        acme = client(s.url(""), _basic("acme-ops"))

        status, page = acme.get("/jobs")
        assert status == 200
        assert ours in page
        assert theirs not in page
        # a tenant= in the query cannot widen the scope
        assert theirs not in acme.get("/jobs?tenant=globex")[1]
        assert theirs not in acme.get("/failures")[1]
        assert acme.get(f"/jobs/{theirs}")[0] == 404
        assert acme.get(f"/jobs/{ours}")[0] == 200

        token = token_of(acme.get(f"/jobs/{ours}")[1])
        retry = [("csrf", token), ("verb", "retry"), ("scope", "ids"), ("confirmed", "1")]
        assert acme.post("/act", [*retry, ("id", theirs)])[0] == 404
        assert _state(s, theirs) == "dead"
        # a bulk move is narrowed to the tenant
        bulk = [
            ("csrf", token),
            ("verb", "retry"),
            ("scope", "filter"),
            ("state", "dead"),
            ("confirmed", "1"),
        ]
        assert acme.post("/act", bulk)[0] == 303
        assert (_state(s, ours), _state(s, theirs)) == ("ready", "dead")
        # what every tenant shares is not a scoped operator's to steer
        status, _, body = acme.post(
            "/pause", [("csrf", token), ("kind", "queue"), ("name", "reports"), ("op", "pause")]
        )
        assert status == 403
        assert "XJOBS_ACTION_REFUSED" in body
        assert (
            acme.post("/task", [("csrf", token), ("name", "nightly"), ("op", "trigger")])[0] == 403
        )
        assert not any(q.paused for q in s.call(s.app.operator.queues()))

        # an operator granted ALL_TENANTS sees every job
        page = client(s.url(""), _basic("admin")).get("/jobs")[1]
        assert ours in page
        assert theirs in page


# -- mounted in a service ---------------------------------------------------------------------------


def test_mounted_under_a_path_its_links_cookie_and_actions_stay_under_it(
    serve: Serve, client: type[Http], token_of: Token
) -> None:
    with serve("memory", mount="/ops", unsafe_no_auth=True) as s:
        job_id = _dead_export(s, "acme", "mounted")
        http = client(s.url(""))
        assert http.get("/")[1] == "the service's own page"
        status, page = http.get("/ops/jobs")
        assert status == 200
        assert f'href="/ops/jobs/{job_id}"' in page
        assert 'href="/ops/static/xjobs.css"' in page
        assert http.get("/ops/static/xjobs.js")[0] == 200
        cookie = next(iter(http.jar))
        assert (cookie.name, cookie.path) == ("xjobs_csrf", "/ops/")

        form = [("csrf", token_of(page)), ("verb", "retry"), ("scope", "ids"), ("id", job_id)]
        status, headers, _ = http.post("/ops/act", [*form, ("confirmed", "1"), ("next", "/jobs")])
        assert status == 303
        assert headers["location"].startswith("/ops/jobs?notice=")
        assert _state(s, job_id) == "ready"


# -- the command ------------------------------------------------------------------------------------


def test_xjobs_web_serves_the_app_until_sigterm(client: type[Http], tmp_path: Path) -> None:
    port = socket_port()
    env = {**os.environ, "XJOBS_WEB_TEST_URL": "memory://", "XJOBS_WEB_PASSWORD": "pw"}
    command = [sys.executable, "-m", "xjobs_cli", "web", "webapp:app", "--port", str(port)]
    command += ["--read-only", "--basic-auth", "ops", "--title", "Billing jobs"]
    command += ["--allowed-host", "jobs.internal"]
    log = (tmp_path / "web.log").open("w+")
    process = subprocess.Popen(command, cwd=Path(__file__).parent, env=env, stderr=log)
    try:
        token = base64.b64encode(b"ops:pw").decode()
        http = client(f"http://127.0.0.1:{port}", {"Authorization": f"Basic {token}"})
        status, page = 0, ""
        for _ in range(300):  # until the process listens (bounded: 300 tries)
            try:
                status, page = http.get("/tasks")
                break
            except OSError:
                if process.poll() is not None:
                    break
                threading.Event().wait(0.1)
        assert status == 200, log.seek(0) or log.read()
        assert "Billing jobs" in page
        assert "nightly" in page  # MODULE:APP: the app's declared task
        assert 'method="post"' not in page
        assert client(f"http://127.0.0.1:{port}").get("/")[0] == 401
        # --allowed-host names a Host it answers besides loopback; any other is refused
        for host, expected in (("jobs.internal", 200), ("evil.example", 400)):
            named = client(f"http://127.0.0.1:{port}", {**http.headers, "Host": host})
            assert named.get("/")[0] == expected, host
        assert http.post("/pause", [("kind", "queue"), ("name", "mail"), ("op", "pause")])[0] == 403
    finally:
        process.send_signal(signal.SIGTERM)
        code = process.wait(30)
        log.close()
    assert code == 0
    assert f"serving http://127.0.0.1:{port}/ (read-only)" in (tmp_path / "web.log").read_text()


def test_basic_auth_needs_its_password_in_the_environment(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from xjobs_cli.main import main

    monkeypatch.delenv("XJOBS_WEB_PASSWORD", raising=False)
    assert main(["web", "--url", "memory://", "--basic-auth", "ops"]) == 2
    assert "XJOBS_USAGE" in capsys.readouterr().err
