"""The claim is ONE update that sets the lease and the fence, read from the partial indexes."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from xjobs.contract.driver import Claim, ClaimOptions
from xjobs.testing.rows import new_job
from xjobs_sqlite.claim import claim_pass, claim_statement
from xjobs_sqlite.enqueue import enqueue_rows
from xjobs_sqlite.install import install
from xjobs_sqlite.settle import complete_many

NOW = 1_000_000


@pytest.fixture
def conn(tmp_path: Path) -> Iterator[sqlite3.Connection]:
    connection = sqlite3.connect(tmp_path / "xjobs.db", isolation_level=None)
    install(connection, NOW)
    try:
        yield connection
    finally:
        connection.close()


def test_a_claim_of_many_jobs_over_two_queues_is_one_statement_that_writes_jobs(
    conn: sqlite3.Connection,
) -> None:
    jobs = [new_job(queue="a") for _ in range(3)] + [new_job(queue="b") for _ in range(3)]
    enqueue_rows(conn, jobs, NOW)
    statements: list[str] = []
    conn.set_trace_callback(statements.append)
    result = claim_pass(conn, ClaimOptions("w-1", {"a": 2, "b": 2}, lease_ms=30_000), NOW)
    conn.set_trace_callback(None)
    assert len(result.jobs) == 4
    claiming = [s for s in statements if "claims = claims + 1" in s]
    assert len(claiming) == 1


def test_each_claimed_job_carries_its_lease_and_fence(conn: sqlite3.Connection) -> None:
    enqueue_rows(conn, [new_job(queue="a")], NOW)
    (job,) = claim_pass(conn, ClaimOptions("w-1", {"a": 1}, lease_ms=5_000), NOW).jobs
    assert (job.attempt, job.claims, job.worker_id, job.lease_until_ms) == (
        1,
        1,
        "w-1",
        NOW + 5_000,
    )


def test_the_claim_reads_the_partial_indexes_and_scans_no_table(conn: sqlite3.Connection) -> None:
    params = {"now": NOW, "worker_id": "w", "lease_ms": 1, "total": 2}
    params.update({"queue_0": "a", "limit_0": 1, "queue_1": "b", "limit_1": 1})
    plan = conn.execute(f"explain query plan {claim_statement(2)}", params).fetchall()
    details = [str(row[3]) for row in plan]
    assert any("jobs_claimable" in d for d in details), details
    assert any("jobs_leased" in d for d in details), details
    assert not [d for d in details if d.startswith("SCAN j") or d == "SCAN jobs"], details


def test_the_due_scan_bounds_run_at_within_each_priority(conn: sqlite3.Connection) -> None:
    params = {"now": NOW, "worker_id": "w", "lease_ms": 1, "total": 1, "queue_0": "a", "limit_0": 1}
    plan = conn.execute(f"explain query plan {claim_statement(1)}", params).fetchall()
    due = [
        str(row[3])
        for row in plan
        if "jobs_claimable" in str(row[3]) and "priority=?" in str(row[3])
    ]
    assert any("run_at_ms<?" in d for d in due), due


def test_due_jobs_are_claimed_in_priority_order_past_many_delayed_ones(
    conn: sqlite3.Connection,
) -> None:
    delayed = [new_job(queue="a", priority=0, run_at_ms=NOW + 60_000 + i) for i in range(50)]
    due = [new_job(queue="a", priority=p, run_at_ms=NOW - 10 + i) for i, p in enumerate([2, 1, 0])]
    enqueue_rows(conn, [*delayed, *due], NOW)
    claimed = claim_pass(conn, ClaimOptions("w-1", {"a": 10}, lease_ms=5_000), NOW).jobs
    assert [job.id for job in claimed] == [due[2].id, due[1].id, due[0].id]


def test_a_batch_of_acks_is_one_statement(conn: sqlite3.Connection) -> None:
    enqueue_rows(conn, [new_job(queue="a") for _ in range(10)], NOW)
    claimed = claim_pass(conn, ClaimOptions("w-1", {"a": 10}, lease_ms=5_000), NOW).jobs
    claims = [Claim(job.id, job.worker_id, job.claims) for job in claimed]
    statements: list[str] = []
    conn.set_trace_callback(statements.append)
    landed = complete_many(conn, [*claims, claims[0]], NOW)
    conn.set_trace_callback(None)
    assert landed == [True] * 10 + [False]
    assert len([s for s in statements if "state = 'completed'" in s]) == 1
