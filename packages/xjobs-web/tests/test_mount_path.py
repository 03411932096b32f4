"""`/_x`, the dashboard's documented mount: `xjobs_web.MOUNT_PATH` for a service's own server, and
`xjobs web --path /_x` served alone, its links, assets, cookie and actions under the prefix."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import pytest

from xjobs_cli.main import main
from xjobs_web import MOUNT_PATH, mount_path
from xjobs_web.errors import DashboardOptionInvalidError

if TYPE_CHECKING:
    from conftest import Http, Serve, Served

Token = Callable[[str], str]


def _dead_export(s: Served, report: str) -> str:
    s.module.FAILING.add(report)
    job_id = s.as_org("acme", s.module.export.enqueue(s.module.Export(org="acme", report=report)))
    s.work()
    s.module.FAILING.discard(report)
    return str(job_id.job_id)


def test_the_documented_mount_is_underscore_x() -> None:
    assert MOUNT_PATH == "/_x"
    assert mount_path() == "/_x"
    assert mount_path("/") == "/"
    assert mount_path("/ops/jobs") == "/ops/jobs"


@pytest.mark.parametrize("bad", ["", "_x", "/_x/", "//x", "/a b", "/x/../y", "/x?y", "/é"])
def test_a_mount_path_that_is_not_a_plain_path_is_refused(bad: str) -> None:
    with pytest.raises(DashboardOptionInvalidError) as refused:
        mount_path(bad)
    assert refused.value.code == "XJOBS_DASHBOARD_OPTION_INVALID"


def test_served_alone_under_a_path_its_links_assets_cookie_and_actions_stay_under_it(
    serve: Serve, client: type[Http], token_of: Token
) -> None:
    with serve("memory", path=MOUNT_PATH, unsafe_no_auth=True) as s:
        job_id = _dead_export(s, "under-x")
        http = client(s.url(""))
        for bare in ("/", "/_x"):
            status, headers, _ = http.request("GET", bare)
            assert (status, headers["location"]) == (307, "/_x/"), bare
        status, page = http.get("/_x/jobs")
        assert status == 200
        assert f'href="/_x/jobs/{job_id}"' in page
        assert 'href="/_x/backfills"' in page
        assert 'href="/_x/static/xjobs.css"' in page
        assert 'src="/_x/static/xjobs.js"' in page
        assert http.get("/_x/static/xjobs.css")[0] == 200
        assert http.get("/_x/")[0] == 200
        assert http.get("/jobs")[0] == 404  # nothing of it outside the prefix
        cookie = next(iter(http.jar))
        assert (cookie.name, cookie.path) == ("xjobs_csrf", "/_x/")

        form = [("csrf", token_of(page)), ("verb", "retry"), ("scope", "ids"), ("id", job_id)]
        status, headers, _ = http.post("/_x/act", [*form, ("confirmed", "1"), ("next", "/jobs")])
        assert status == 303
        assert headers["location"].startswith("/_x/jobs?notice=")
        assert str(s.call(s.app.get_job(job_id)).state) == "ready"


def test_mounted_at_the_documented_path_in_a_service(serve: Serve, client: type[Http]) -> None:
    with serve("memory", mount=MOUNT_PATH, unsafe_no_auth=True) as s:
        job_id = _dead_export(s, "mounted-x")
        http = client(s.url(""))
        assert http.get("/")[1] == "the service's own page"
        status, page = http.get("/_x/jobs")
        assert status == 200
        assert f'href="/_x/jobs/{job_id}"' in page
        assert http.get("/_x/static/xjobs.js")[0] == 200


def test_xjobs_web_refuses_a_bad_path_before_serving(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["web", "--url", "memory://", "--path", "_x/"]) == 2
    assert "XJOBS_DASHBOARD_OPTION_INVALID" in capsys.readouterr().err
