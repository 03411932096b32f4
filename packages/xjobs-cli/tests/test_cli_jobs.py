"""`xjobs jobs list|show`: pages newest first with a cursor, one job in full, and their refusals."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from conftest import Ops

# -- list -------------------------------------------------------------------------------------------


def test_list_prints_a_versioned_document_of_jobs_newest_first(ops: Ops) -> None:
    first = ops.enqueue("receipt", "r1")
    ops.tick()
    second = ops.enqueue("charge", "c1")

    result = ops.cli("jobs list")

    assert result.code == 0
    # stderr carries log lines only (a test Redis runs without persistence and says so), never
    # an error document
    assert '"error"' not in result.err
    doc = result.doc
    assert (doc["version"], doc["kind"]) == (1, "jobs.list")
    assert [j["id"] for j in doc["jobs"]] == [*second, *first]
    assert doc["cursor"] is None
    job = doc["jobs"][0]
    assert (job["name"], job["queue"], job["state"], job["attempt"]) == (
        "charge",
        "billing",
        "ready",
        0,
    )
    assert set(job) == {
        "id", "name", "queue", "state", "tenant", "priority", "attempt", "max_attempts",
        "run_at_ms", "created_at_ms", "updated_at_ms", "finished_at_ms", "claimed_by",
        "progress", "last_error",
    }  # fmt: skip


def test_list_filters_by_state_queue_and_name(ops: Ops) -> None:
    dead = ops.dead("c-dead")
    ops.enqueue("charge", "c-ready")
    receipt = ops.enqueue("receipt", "r1")

    by_state = ops.cli("jobs list", "--state", "dead,failed").doc
    by_queue = ops.cli("jobs list", "--queue", "default").doc
    by_name = ops.cli("jobs list", "--name", "charge", "--state", "ready").doc

    assert [j["id"] for j in by_state["jobs"]] == dead
    assert by_state["where"]["states"] == ["failed", "dead"]
    assert [j["id"] for j in by_queue["jobs"]] == receipt
    assert [(j["name"], j["state"]) for j in by_name["jobs"]] == [("charge", "ready")]


def test_list_as_a_table_ends_with_the_cursor_of_the_next_page(ops: Ops) -> None:
    ids = ops.enqueue("receipt", "a", "b", "c")

    result = ops.cli("jobs list", "--limit", "2", json=False)

    assert result.code == 0
    lines = result.out.splitlines()
    assert lines[0].split() == [
        "ID",
        "NAME",
        "QUEUE",
        "STATE",
        "ATTEMPT",
        "CREATED",
        "DUE",
        "LAST",
        "ERROR",
    ]
    assert len(lines) == 4
    assert lines[-1].startswith("next page: --after ")
    cursor = lines[-1].removeprefix("next page: --after ")
    rest = ops.cli("jobs list", "--limit", "2", "--after", cursor).doc
    shown = {line.split()[0] for line in lines[1:3]}
    assert shown | {j["id"] for j in rest["jobs"]} == set(ids)
    assert rest["cursor"] is None


def test_an_empty_list_says_so(memory_ops: Ops) -> None:
    result = memory_ops.cli("jobs list", json=False)

    assert (result.code, result.out) == (0, "no job matches\n")


def test_list_through_url_reads_the_same_jobs(ops: Ops) -> None:
    first = ops.enqueue("receipt", "r1")
    ops.tick()
    second = ops.enqueue("receipt", "r2")

    result = ops.cli("jobs list", url=True)

    assert result.code == 0
    assert [j["id"] for j in result.doc["jobs"]] == [*second, *first]


def test_paging_ten_thousand_jobs_visits_each_once_newest_first(ops: Ops) -> None:
    enqueued: list[str] = []

    async def enqueue_all(app: object) -> None:
        for batch in range(10):
            orders = [ops.module.Order(order_id=f"o{batch}-{i}") for i in range(1000)]
            enqueued.extend(r.job_id for r in await ops.module.charge.enqueue_many(orders))

    ops.run(enqueue_all)

    seen: list[tuple[int, str]] = []
    after: list[str] = []
    pages = 0
    while True:
        doc = ops.cli("jobs list", "--limit", "500", *after).doc
        pages += 1
        seen.extend((j["created_at_ms"], j["id"]) for j in doc["jobs"])
        if doc["cursor"] is None:
            break
        after = ["--after", doc["cursor"]]

    assert pages == 20
    assert len(seen) == len(set(seen)) == 10_000
    assert {job_id for _, job_id in seen} == set(enqueued)
    assert seen == sorted(seen, reverse=True)


# -- list refusals ----------------------------------------------------------------------------------


def test_an_unknown_state_is_refused_with_its_code(ops: Ops) -> None:
    result = ops.cli("jobs list", "--state", "dead,lost")

    assert (result.code, result.out) == (2, "")
    assert result.error["code"] == "XJOBS_FILTER_INVALID"
    assert "'lost'" in result.error["message"]


def test_a_page_over_the_maximum_is_refused(ops: Ops) -> None:
    result = ops.cli("jobs list", "--limit", "501")

    assert result.code == 2
    assert result.error["code"] == "XJOBS_JOB_PAGE_INVALID"


def test_a_garbled_cursor_is_refused(ops: Ops) -> None:
    result = ops.cli("jobs list", "--after", "not-a-cursor")

    assert result.code == 2
    assert result.error["code"] == "XJOBS_JOB_PAGE_INVALID"


def test_a_cursor_of_another_filter_is_refused(memory_ops: Ops) -> None:
    memory_ops.enqueue("receipt", "a", "b")
    cursor = memory_ops.cli("jobs list", "--limit", "1").doc["cursor"]

    result = memory_ops.cli("jobs list", "--limit", "1", "--state", "ready", "--after", cursor)

    assert result.code == 2
    assert result.error["code"] == "XJOBS_JOB_PAGE_INVALID"
    assert "another filter" in result.error["message"]


def test_a_refusal_without_json_is_a_coded_line_on_stderr(memory_ops: Ops) -> None:
    result = memory_ops.cli("jobs list", "--state", "lost", json=False)

    assert (result.code, result.out) == (2, "")
    assert result.err.startswith("error: XJOBS_FILTER_INVALID: unknown state 'lost'")


# -- show -------------------------------------------------------------------------------------------


def test_show_prints_the_record_the_redacted_input_the_steps_and_each_error(ops: Ops) -> None:
    (job_id,) = ops.dead("c1")

    result = ops.cli("jobs show", job_id)

    assert result.code == 0
    doc = result.doc
    assert (doc["version"], doc["kind"]) == (1, "jobs.show")
    assert doc["job"]["id"] == job_id
    assert doc["job"]["state"] == "dead"
    assert "payload" not in doc["job"]
    assert doc["input"] == {"order_id": "c1", "card": "****"}
    assert doc["redaction"] == "applied"
    assert [(s["name"], s["status"], s["result"]) for s in doc["steps"]] == [
        ("lookup", "done", {"found": "c1"})
    ]
    (error,) = doc["errors"]
    assert (error["attempt"], error["error_class"], error["message"]) == (
        1,
        "RuntimeError",
        "card declined for c1",
    )
    # a job outside any workflow: no parent, no children (None where the backend keeps no
    # child jobs: it does not declare `children`)
    assert doc["family"] in ({"parent_id": None, "children": {}}, None)


def test_show_through_url_withholds_the_input_the_key_and_the_step_results(ops: Ops) -> None:
    (job_id,) = ops.dead("c1")

    doc = ops.cli("jobs show", job_id, url=True).doc
    text = ops.cli("jobs show", job_id, url=True, json=False).out

    withheld = "<withheld: this process declares no job named 'charge'>"
    assert doc["redaction"] == "unavailable"
    assert (doc["input"], doc["job"]["idempotency_key"]) == (withheld, withheld)
    assert [s["result"] for s in doc["steps"]] == [withheld]
    assert "4111" not in json.dumps(doc) + text
    assert "withheld: --url opens the backend without job declarations" in text


def test_show_as_text_reads_top_down(memory_ops: Ops) -> None:
    (job_id,) = memory_ops.dead("c1")

    out = memory_ops.cli("jobs show", job_id, json=False).out

    assert out.startswith(f"job {job_id}  charge  [dead]\n")
    for expected in (
        "input (shown through the job's redact hooks):",
        '"card": "****"',
        "steps (1):",
        "errors (1, oldest first):",
        "RuntimeError: card declined for c1",
    ):
        assert expected in out


def test_show_of_an_unknown_id_is_refused(ops: Ops) -> None:
    result = ops.cli("jobs show", "01900000-0000-7000-8000-000000000000")

    assert (result.code, result.out) == (2, "")
    assert result.error["code"] == "XJOBS_JOB_NOT_FOUND"


def test_show_takes_exactly_one_id(memory_ops: Ops) -> None:
    result = memory_ops.cli("jobs show", "a", "b")

    assert result.code == 2
    assert result.error["code"] == "XJOBS_USAGE"
