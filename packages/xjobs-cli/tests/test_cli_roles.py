"""The verbs of the long-running roles share one builder: `MODULE:APP`, `--drain-timeout`, the stats line."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

import xjobs
from xjobs_cli import relay_cli, scheduler_cli, worker_cli
from xjobs_cli.main import main
from xjobs_cli.role_cli import serve


class Order(BaseModel):
    order_id: str


@xjobs.job(tenant="none", idempotency_key=lambda o: o.order_id)
async def receipt(ctx: xjobs.JobContext, input: Order) -> None:
    """The job each role here runs or relays."""


@pytest.mark.parametrize("verb", ["worker", "scheduler", "relay"])
def test_every_role_verb_takes_an_app_a_drain_timeout_and_a_log_level(
    verb: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([verb, "--help"]) == 0
    out = capsys.readouterr().out
    for shared in ("MODULE:APP", "--drain-timeout", "--log-level"):
        assert shared in out


@pytest.mark.parametrize("verb", ["worker", "scheduler", "relay"])
def test_a_negative_drain_timeout_is_a_usage_error(
    verb: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([verb, "x:app", "--drain-timeout", "-1"]) == 2
    assert "usage: xjobs" in capsys.readouterr().err


def test_the_verbs_are_named_for_their_roles() -> None:
    names = [c.name for c in (worker_cli.command, scheduler_cli.command, relay_cli.command)]
    assert names == ["worker", "scheduler", "relay"]


@pytest.mark.asyncio
async def test_the_worker_logs_its_stats_line_with_its_id_and_every_count(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level("INFO")
    # `serve` opens the app (and its fresh memory backend) itself: the start hook enqueues the job
    app = xjobs.App("memory://", jobs=[receipt], on_worker_start=_enqueue_one)
    stats = await serve(worker_cli.command, app, {"until_idle": True})
    counts = " ".join(f"{name}={value}" for name, value in stats.as_dict().items())
    assert f"worker stopped: id={stats.role_id} {counts}" in caplog.messages
    assert (stats.as_dict()["claimed"], stats.as_dict()["completed"]) == (1, 1)


@pytest.mark.asyncio
async def test_the_relay_logs_its_stats_line_under_its_own_name(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level("INFO")
    stats = await serve(
        relay_cli.command, xjobs.App("memory://", jobs=[receipt]), {"until_idle": True}
    )
    (line,) = [m for m in caplog.messages if "stopped: id=" in m]
    assert line.startswith(f"relay stopped: id={stats.role_id} passes=1 ")


async def _enqueue_one(app: xjobs.App) -> None:
    await receipt.enqueue(Order(order_id="o1"))
