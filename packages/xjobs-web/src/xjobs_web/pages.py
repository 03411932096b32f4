"""The pages an operator reads: overview, jobs, one job, failures, tasks, backfills, workers, and the
confirmation of a bulk move. Each reads the visit's operator only: `app.operator`, scoped with
`for_tenant` to the tenant the tenant hook named."""

from __future__ import annotations

from typing import Any

from starlette.responses import Response

from xjobs import JobFilter, JobRecord, Operator
from xjobs.contract.introspection import COUNT_CAP, DEFAULT_JOB_PAGE
from xjobs.errors import JobPageInvalidError
from xjobs.factories.backfill_inspect import backfill_run
from xjobs.operate.filters import job_filter
from xjobs.operate.verbs import VERBS
from xjobs_web import csrf
from xjobs_web.failures import SCAN_JOBS, failures
from xjobs_web.guard import Dashboard, Visit
from xjobs_web.moves import narrowed
from xjobs_web.overview import overview
from xjobs_web.render import html
from xjobs_web.timeline import timeline

STATES = ("ready", "running", "waiting", "completed", "failed", "dead", "cancelled")


def context(dash: Dashboard, visit: Visit, nav: str, **values: Any) -> dict[str, Any]:
    """What every page's layout reads, and the page's own values."""
    return {
        "title": dash.options.title,
        "base": visit.base,
        "nav": nav,
        "read_only": dash.options.read_only,
        "csrf_field": csrf.FIELD,
        "csrf_token": csrf.token(dash.options.csrf_secret, visit.nonce),
        "refresh_seconds": dash.options.refresh_seconds,
        "tenant": visit.tenant,
        "notice": visit.request.query_params.get("notice"),
        "now_ms": dash.app.clock.now_ms(),
        "count_cap": COUNT_CAP,
        **values,
    }


def operator_of(dash: Dashboard, visit: Visit) -> Operator:
    """The operator a visit reads and moves through: scoped to its tenant when the tenant hook
    named one (`for_tenant` refuses an empty one: it never reads as every tenant)."""
    op = dash.app.operator
    return op if visit.tenant is None else op.for_tenant(visit.tenant)


async def overview_page(dash: Dashboard, visit: Visit) -> Response:
    """Every queue's counts, oldest due job and pause; the hour's throughput and failure rate."""
    now = dash.app.clock.now_ms()
    view = await overview(operator_of(dash, visit), now)
    return html(dash.env, "overview.html", context(dash, visit, "overview", view=view))


def _filter(visit: Visit) -> JobFilter:
    q = visit.request.query_params
    states = [s for raw in q.getlist("state") for s in raw.split(",") if s]
    return job_filter(
        states=states,
        queue=q.get("queue") or None,
        name=q.get("name") or None,
        tenant=q.get("tenant") or None,
    )


def _limit(raw: str | None) -> int:
    if not raw:
        return DEFAULT_JOB_PAGE
    try:
        return int(raw)
    except ValueError:
        raise JobPageInvalidError(f"a page size is a number of jobs; got {raw[:20]!r}") from None


def _bulk_verbs(dash: Dashboard, where: JobFilter) -> list[str]:
    if dash.options.read_only:
        return []
    return [v.name for v in VERBS if narrowed(v, where) is not None]


async def jobs_page(dash: Dashboard, visit: Visit) -> Response:
    """One page of jobs under the filter, newest first; `partial=1` answers the table alone (the
    live refresh)."""
    q = visit.request.query_params
    where = _filter(visit)
    page = await operator_of(dash, visit).list_jobs(
        where, limit=_limit(q.get("limit")), after=q.get("after") or None
    )
    params = {
        "state": list(where.states),
        "queue": where.queue,
        "name": where.name,
        "tenant": None if visit.tenant else where.tenant,
        "limit": q.get("limit"),
    }
    values = context(
        dash,
        visit,
        "jobs",
        where=where,
        page=page,
        params=params,
        after=q.get("after"),
        states=STATES,
        bulk_verbs=_bulk_verbs(dash, where),
    )
    template = "_jobs_table.html" if q.get("partial") else "jobs.html"
    return html(dash.env, template, values)


def actions_for(job: JobRecord, now_ms: int) -> list[str]:
    """The moves a job's state allows now."""
    verbs = [v.name for v in VERBS if job.state in v.states]
    if "promote" in verbs and job.run_at_ms <= now_ms:
        verbs.remove("promote")
    return verbs


async def job_page(dash: Dashboard, visit: Visit) -> Response:
    """One job: record, redacted input, each attempt's error, the steps as a timeline, and the
    backfill run it is (if it runs a sweep)."""
    job_id = visit.request.path_params["job_id"]
    operator = operator_of(dash, visit)
    detail = await operator.get_job(job_id)
    run = await backfill_run(dash.app.backend, operator, detail.record)
    now = dash.app.clock.now_ms()
    steps = timeline(detail.record, list(detail.steps), list(detail.errors))
    values = context(
        dash,
        visit,
        "jobs",
        detail=detail,
        job=detail.record,
        steps=steps,
        redaction=detail.redaction,
        backfill=run,
        actions=[] if dash.options.read_only else actions_for(detail.record, now),
    )
    return html(dash.env, "job.html", values)


async def failures_page(dash: Dashboard, visit: Visit) -> Response:
    """The newest failed and dead jobs grouped by error class and message."""
    groups, more = await failures(operator_of(dash, visit))
    values = context(dash, visit, "failures", groups=groups, more=more, scan=SCAN_JOBS)
    return html(dash.env, "failures.html", values)


async def tasks_page(dash: Dashboard, visit: Visit) -> Response:
    """The app's cron tasks: next and last fire, pause; pause, resume, trigger now."""
    tasks = await operator_of(dash, visit).tasks()
    return html(dash.env, "tasks.html", context(dash, visit, "tasks", tasks=tasks))


async def backfills_page(dash: Dashboard, visit: Visit) -> Response:
    """The backfill ledger's runs (of one sweep with `?name=`), newest first: state, cursor, rows
    and batches, each linked to the job it is (where it is cancelled or retried)."""
    name = visit.request.query_params.get("name") or None
    ledger = "backfills" in dash.app.backend.capabilities
    runs = await operator_of(dash, visit).backfills(name) if ledger else []
    values = context(dash, visit, "backfills", runs=runs, name=name, ledger=ledger)
    return html(dash.env, "backfills.html", values)


async def workers_page(dash: Dashboard, visit: Visit) -> Response:
    """The live worker processes, their queues and the jobs they run (of the tenant, if scoped)."""
    workers = await operator_of(dash, visit).workers()
    rows = [(w, list(w.running)) for w in workers]
    return html(dash.env, "workers.html", context(dash, visit, "workers", workers=rows))
