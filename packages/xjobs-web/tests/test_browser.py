"""The dashboard in a real browser (Debian's headless Chromium driven by Playwright) over real
Postgres and Redis: real jobs enqueued and run, pages opened, retry / cancel / pause clicked, and
what the backend then holds asserted. Each page is saved as a screenshot (see `shots`)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from playwright.sync_api import Browser, Page, expect, sync_playwright

from xjobs import JobFilter
from xjobs_web import basic_auth

if TYPE_CHECKING:
    from conftest import Serve, Served

BACKENDS = ["postgres", "redis"]
USER, PASSWORD = "ops", "browser-pw"


@pytest.fixture(scope="module")
def browser(chromium_path: str) -> Iterator[Browser]:
    """One headless Chromium for the module (the system browser: no download)."""
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=chromium_path, args=["--no-sandbox"])
        yield launched
        launched.close()


def _seed(s: Served) -> None:
    """A day's worth of jobs: exports of two orgs (one failing the same way three times), mail,
    and a delayed export."""
    m = s.module
    m.FAILING.update({"q3-ledger", "q3-payroll", "q3-invoices"})
    for org, reports in (
        ("acme", ["q1", "q2", "q3-ledger", "q3-payroll"]),
        ("globex", ["q3-invoices", "h1"]),
    ):
        s.as_org(org, m.export.enqueue_many([m.Export(org=org, report=r) for r in reports]))
    s.as_org(None, m.send_mail.enqueue_many([m.Mail(to=f"user{i}@example.com") for i in range(6)]))
    s.work()
    m.FAILING.clear()
    s.as_org("acme", m.export.enqueue(m.Export(org="acme", report="year-end"), delay=7200))


@pytest.fixture(scope="module", params=BACKENDS)
def site(request: pytest.FixtureRequest, serve: Serve) -> Iterator[Served]:
    """The test app's dashboard over a fresh Postgres schema or Redis prefix, seeded, with a live
    refresh every second, behind basic auth (the browser answers its challenge)."""
    with serve(request.param, refresh_seconds=1, auth=basic_auth(USER, PASSWORD)) as s:
        _seed(s)
        yield s


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    context = browser.new_context(
        viewport={"width": 1280, "height": 560},
        http_credentials={"username": USER, "password": PASSWORD},
    )
    opened = context.new_page()
    yield opened
    context.close()


def _shot(page: Page, shots: Path, site: Served, name: str) -> None:
    """Save the page in the test's folder; the Postgres run's also in $XJOBS_WEB_SCREENSHOTS
    (the README's), as NAME.png."""
    page.screenshot(path=str(shots / f"{name}-{site.kind}.png"), full_page=True)
    keep = os.environ.get("XJOBS_WEB_SCREENSHOTS")
    if keep and site.kind == "postgres":
        Path(keep).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(keep) / f"{name}.png"), full_page=True)


def _job_ids(s: Served, where: JobFilter) -> list[str]:
    return [j.id for j in s.call(s.app.operator.list_jobs(where, limit=100)).jobs]


def _state(s: Served, job_id: str) -> str:
    return str(s.call(s.app.get_job(job_id)).state)


def test_overview_pauses_and_resumes_a_queue(site: Served, page: Page, shots: Path) -> None:
    page.goto(site.url("/"))
    expect(page.locator("h1").first).to_have_text("Queues")
    expect(page.locator("svg.chart")).to_be_visible()
    _shot(page, shots, site, "overview")

    page.get_by_test_id("pause-mail").click()
    expect(page.locator(".notice")).to_have_text("queue mail paused")
    paused = {q.queue: q.paused for q in site.call(site.app.operator.queues())}
    assert paused == {"mail": True, "reports": False}

    page.get_by_test_id("resume-mail").click()
    expect(page.locator(".notice")).to_have_text("queue mail resumed")
    assert not any(q.paused for q in site.call(site.app.operator.queues()))


def test_a_dead_job_is_read_and_retried_from_its_page(
    site: Served, page: Page, shots: Path
) -> None:
    page.goto(site.url("/jobs?state=dead&name=export"))
    expect(page.get_by_test_id("jobs-table").locator("tbody tr")).to_have_count(3)
    _shot(page, shots, site, "jobs")
    dead = _job_ids(site, JobFilter(states=("dead",), name="export"))
    job_id = dead[-1]

    page.locator(f'tr[data-job="{job_id}"] a').click()
    expect(page.get_by_test_id("job-state")).to_have_text("dead")
    # the input as the job's redact_input shows it, each attempt's error with its traceback
    expect(page.get_by_test_id("input")).to_contain_text('"token": "****"')
    expect(page.get_by_test_id("input")).not_to_contain_text("s3cret")
    expect(page.locator("details.attempt summary")).to_contain_text("TimeoutError")
    expect(page.locator("pre.traceback")).to_contain_text("raise TimeoutError")
    expect(page.locator("ol.timeline li")).to_have_count(2)
    _shot(page, shots, site, "job")

    page.get_by_test_id("act-retry").click()
    expect(page.locator(".notice")).to_contain_text("retried 1 of 1 jobs")
    expect(page.get_by_test_id("job-state")).to_have_text("ready")
    assert _state(site, job_id) == "ready"
    site.work()
    assert _state(site, job_id) == "completed"
    page.reload()
    expect(page.locator("ol.timeline li .badge")).to_have_count(2)  # gather and cool-down replayed


def test_a_delayed_job_is_cancelled_from_its_page(site: Served, page: Page) -> None:
    (job_id,) = _job_ids(site, JobFilter(states=("ready",), name="export"))
    page.goto(site.url(f"/jobs/{job_id}"))
    expect(page.get_by_test_id("act-promote")).to_be_visible()
    page.get_by_test_id("act-cancel").click()
    expect(page.get_by_test_id("job-state")).to_have_text("cancelled")
    assert _state(site, job_id) == "cancelled"


def test_failures_are_grouped_and_retried_after_a_confirmation(
    site: Served, page: Page, shots: Path
) -> None:
    dead = set(_job_ids(site, JobFilter(states=("dead",))))
    page.goto(site.url("/failures"))
    group = page.locator("section.group").first
    expect(group.locator("h2")).to_contain_text("TimeoutError")
    _shot(page, shots, site, "failures")

    page.get_by_test_id("retry-group-1").click()
    expect(page.get_by_test_id("confirm-count")).to_contain_text(
        f"retry will move {len(dead)} jobs"
    )
    _shot(page, shots, site, "confirm")
    assert set(_job_ids(site, JobFilter(states=("dead",)))) == dead  # nothing moved yet

    page.get_by_test_id("confirm").click()
    expect(page.locator(".notice")).to_contain_text(f"retried {len(dead)} of {len(dead)} jobs")
    assert {_state(site, j) for j in dead} == {"ready"}
    site.work()
    assert {_state(site, j) for j in dead} == {"completed"}


def test_a_filter_lists_live_and_moves_what_it_matches(site: Served, page: Page) -> None:
    m = site.module
    site.as_org(
        None,
        m.send_mail.enqueue_many([m.Mail(to=f"late{i}@example.com") for i in range(4)], delay=600),
    )
    page.goto(site.url("/jobs"))
    page.locator('input[name="state"][value="ready"]').check()
    page.locator('input[name="queue"]').fill("mail")
    page.get_by_role("button", name="filter").click()
    rows = page.get_by_test_id("jobs-table").locator("tbody tr")
    expect(rows).to_have_count(4)

    # the live refresh brings a job enqueued after the page was drawn
    (late,) = site.as_org(
        None, m.send_mail.enqueue_many([m.Mail(to="later@example.com")], delay=600)
    )
    expect(page.locator(f'tr[data-job="{late.job_id}"]')).to_be_visible()
    expect(rows).to_have_count(5)

    page.get_by_test_id("bulk-promote").click()
    expect(page.get_by_test_id("confirm-count")).to_contain_text("promote will move 5 jobs")
    page.get_by_test_id("confirm").click()
    expect(page.locator(".notice")).to_contain_text("promoted 5 jobs")
    due = site.call(site.app.operator.queues())
    assert {q.queue: (q.ready, q.scheduled) for q in due}["mail"] == (5, 0)


def test_tasks_trigger_now_and_workers_show_what_runs(
    site: Served, page: Page, shots: Path
) -> None:
    m = site.module
    before = set(_job_ids(site, JobFilter(name="export")))
    page.goto(site.url("/tasks"))
    expect(page.locator("table.grid tbody tr")).to_have_count(1)
    _shot(page, shots, site, "tasks")
    page.get_by_test_id("trigger-nightly").click()
    expect(page.locator(".notice")).to_contain_text("task nightly: enqueued job")
    (fired,) = set(_job_ids(site, JobFilter(name="export"))) - before
    assert _state(site, fired) == "ready"

    (held,) = site.as_org(None, m.hold.enqueue_many([m.Mail(to="held@example.com")]))
    worker = site.app.worker(queues=["slow"])
    site.call(worker.start())
    try:
        page.goto(site.url("/workers"))
        row = page.locator("table.grid tbody tr")
        expect(row).to_have_count(1)
        expect(row).to_contain_text("slow")
        expect(row.locator(f'a[href$="/jobs/{held.job_id}"]')).to_be_visible()
        _shot(page, shots, site, "workers")
    finally:
        site.loop.call_soon_threadsafe(m.GATE.set)
        worker.stop_accepting(drain_timeout_ms=5000)
        site.call(worker.wait())
        site.call(worker.close())
    assert _state(site, held.job_id) == "completed"
