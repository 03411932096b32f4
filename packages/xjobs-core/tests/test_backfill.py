"""`backfill()` declared and gated: its refusals, scope, rate, registry, the gate, the pending diff and the one projection (factories/backfill*.py)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from xjobs import App
from xjobs.clock import ManualClock
from xjobs.contract.backfills import BackfillLedger, BackfillStart
from xjobs.errors import CapabilityMissingError, OptionInvalidError
from xjobs.factories import (
    Page,
    backfill,
    backfill_spec,
    current_environment,
    gate_backfill,
    is_backfill,
    registered_backfills,
)
from xjobs.factories.backfill_errors import (
    BackfillAppliedError,
    BackfillEnvironmentError,
    BackfillInvalidError,
    BackfillRequiresError,
    BackfillScopeError,
)
from xjobs.factories.backfill_inspect import inspect_backfills
from xjobs.factories.backfill_pending import pending_backfills
from xjobs.factories.backfill_rate import rate_interval_s
from xjobs.factories.backfill_spec import BackfillSpec, checksum_of
from xjobs.ids import new_id
from xjobs.memory.backfills import MemoryBackfillLedger

ROWS = list(range(1, 6))


async def fetch(cursor: Any, limit: int, tenant: str | None) -> Page[int]:
    after = 0 if cursor is None else int(cursor)
    items = [r for r in ROWS if r > after][:limit]
    return Page(items, items[-1] if len(items) == limit else None)


async def handle(items: list[int], tenant: str | None) -> None:
    return None


def _ledger() -> BackfillLedger:
    return MemoryBackfillLedger(ManualClock())


def _sweep(name: str = "fill_totals", **options: Any) -> BackfillSpec:
    ledger = _ledger()
    handle_ = backfill(name, fetch=fetch, handle=handle, ledger=lambda: ledger, **options)
    spec = backfill_spec(handle_)
    assert spec is not None
    return spec


async def _complete(ledger: BackfillLedger, spec: BackfillSpec, environment: str) -> str:
    run_id = new_id()
    await ledger.begin(BackfillStart(run_id, new_id(), spec.name, spec.checksum, environment, None))
    assert await ledger.finish(run_id, "completed", None)
    return run_id


class TestTheDeclaration:
    def test_a_backfill_is_a_job_handle_stamped_with_its_spec(self) -> None:
        ledger = _ledger()
        sweep = backfill(
            "fill_totals",
            fetch=fetch,
            handle=handle,
            ledger=lambda: ledger,
            batch=50,
            environments=["staging", "production"],
            requires=["fill_names"],
            rate=4,
        )
        spec = backfill_spec(sweep)
        assert spec is not None
        assert is_backfill(sweep)
        assert sweep.name == "fill_totals"
        assert (spec.batch, spec.environments, spec.requires, spec.interval_s) == (
            50,
            ("production", "staging"),
            ("fill_names",),
            0.25,
        )
        assert spec.checksum == checksum_of("fill_totals", "1", "none")
        assert sweep.tenant_for(sweep.input_model()) is None

    def test_a_new_version_or_scope_is_a_new_checksum(self) -> None:
        assert checksum_of("a", "1", "none") != checksum_of("a", "2", "none")
        assert checksum_of("a", "1", "none") != checksum_of("a", "1", "input")
        assert checksum_of("a", "1", "none") == checksum_of("a", "1", "none")

    @pytest.mark.parametrize(
        ("options", "error"),
        [
            ({"batch": 0}, OptionInvalidError),
            ({"batch": 10_001}, OptionInvalidError),
            ({"rate": 0}, BackfillInvalidError),
            ({"rate": float("inf")}, OptionInvalidError),
            ({"rate": True}, BackfillInvalidError),
            ({"environments": []}, BackfillInvalidError),
            ({"environments": "production"}, BackfillInvalidError),
            ({"environments": ["Prod uction"]}, BackfillInvalidError),
            ({"requires": "fill_names"}, BackfillInvalidError),
            ({"requires": ["fill_totals"]}, BackfillInvalidError),
            ({"version": ""}, BackfillInvalidError),
            ({"tenant": "org-1"}, BackfillScopeError),
        ],
    )
    def test_a_bad_option_is_refused_at_declaration(
        self, options: dict[str, Any], error: type[Exception]
    ) -> None:
        with pytest.raises(error):
            _sweep(**options)

    def test_a_missing_callable_is_refused(self) -> None:
        with pytest.raises(BackfillInvalidError):
            backfill("fill_totals", fetch=fetch, handle=None, ledger=_ledger)  # type: ignore[arg-type]

    def test_the_rate_is_an_interval_between_batch_starts(self) -> None:
        assert rate_interval_s(None) == 0.0
        assert rate_interval_s(2) == 0.5

    def test_a_cross_tenant_sweep_refuses_an_input_naming_a_tenant(self) -> None:
        from xjobs.factories.backfill_scope import ScopedInput, tenant_of

        assert tenant_of("none", ScopedInput(), what="b") is None
        assert tenant_of("input", ScopedInput(tenant="org-1"), what="b") == "org-1"
        with pytest.raises(BackfillScopeError):
            tenant_of("none", ScopedInput(tenant="org-1"), what="b")
        with pytest.raises(BackfillScopeError):
            tenant_of("input", ScopedInput(), what="b")

    def test_registered_backfills_are_the_sweeps_among_an_apps_jobs(self) -> None:
        ledger = _ledger()
        second = backfill("fill_b", fetch=fetch, handle=handle, ledger=lambda: ledger)
        first = backfill("fill_a", fetch=fetch, handle=handle, ledger=lambda: ledger)
        app = App("memory://", jobs=[second, first])
        assert [s.name for s in registered_backfills(app.jobs.values())] == ["fill_a", "fill_b"]


class TestTheGate:
    @pytest.mark.asyncio
    async def test_the_environment_is_read_from_xjobs_environment(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.delenv("XJOBS_ENVIRONMENT", raising=False)
        assert current_environment() == "development"
        monkeypatch.setenv("XJOBS_ENVIRONMENT", "production")
        assert current_environment() == "production"

    @pytest.mark.asyncio
    async def test_the_gate_refuses_the_wrong_environment_a_missing_requirement_and_a_rerun(
        self,
    ) -> None:
        ledger = _ledger()
        needed = _sweep("fill_names")
        spec = _sweep(environments=["production"], requires=["fill_names"])
        with pytest.raises(BackfillEnvironmentError):
            await gate_backfill(spec, ledger, environment="staging")
        with pytest.raises(BackfillRequiresError):
            await gate_backfill(spec, ledger, environment="production")
        await _complete(ledger, needed, "staging")
        with pytest.raises(BackfillRequiresError):  # completed elsewhere does not count here
            await gate_backfill(spec, ledger, environment="production")
        await _complete(ledger, needed, "production")
        await gate_backfill(spec, ledger, environment="production")
        run_id = await _complete(ledger, spec, "production")
        with pytest.raises(BackfillAppliedError, match=run_id):
            await gate_backfill(spec, ledger, environment="production")

    @pytest.mark.asyncio
    async def test_a_failed_run_does_not_block(self) -> None:
        ledger, spec = _ledger(), _sweep()
        run_id = new_id()
        await ledger.begin(BackfillStart(run_id, new_id(), spec.name, spec.checksum, "ci", None))
        assert await ledger.finish(run_id, "failed", "boom")
        await gate_backfill(spec, ledger, environment="ci")


class TestPendingAndInspect:
    @pytest.mark.asyncio
    async def test_pending_is_declared_minus_completed_per_environment(self) -> None:
        ledger = _ledger()
        everywhere = _sweep("fill_a")
        production = _sweep("fill_b", environments=["production"])
        per_tenant = _sweep("fill_c", tenant="input")
        await _complete(ledger, everywhere, "production")
        found = await pending_backfills(
            [production, everywhere, per_tenant], ledger, ["staging", "production"]
        )
        assert [(p.name, p.environment) for p in found] == [
            ("fill_a", "staging"),
            ("fill_b", "production"),
        ]
        await _complete(ledger, production, "production")
        await _complete(ledger, everywhere, "staging")
        assert (
            await pending_backfills([production, everywhere], ledger, ["staging", "production"])
            == []
        )

    @pytest.mark.asyncio
    async def test_inspect_is_the_one_json_projection(self) -> None:
        ledger = _ledger()
        spec = _sweep("fill_a")
        run_id = await _complete(ledger, spec, "ci")
        pending = await pending_backfills([spec], ledger, ["production"])
        view = await inspect_backfills([spec], ledger, pending)
        assert json.loads(json.dumps(view)) == view
        assert [d["name"] for d in view["declared"]] == ["fill_a"]
        assert [(r["run_id"], r["status"]) for r in view["runs"]] == [(run_id, "completed")]
        assert view["pending"] == [
            {"name": "fill_a", "environment": "production", "checksum": spec.checksum}
        ]


class TestThePass:
    @pytest.mark.asyncio
    async def test_a_backend_without_a_ledger_fails_the_run(self) -> None:
        sweep = backfill("fill_totals", fetch=fetch, handle=handle, ledger=lambda: None)
        async with App("memory://", jobs=[sweep]) as app:
            run = await app.enqueue(sweep, {})
            await app.run_worker(until_idle=True)
            record = await app.get_job(run.job_id)
        assert record.state != "completed"
        assert CapabilityMissingError.code in (record.last_error or "")

    @pytest.mark.asyncio
    async def test_a_sweep_out_of_its_environments_fails_for_good_and_writes_no_row(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setenv("XJOBS_ENVIRONMENT", "staging")
        handled: list[int] = []

        async def keep(items: list[int], tenant: str | None) -> None:
            handled.extend(items)

        sweep = backfill(
            "fill_totals",
            fetch=fetch,
            handle=keep,
            ledger=lambda: app.backend.backfills,
            environments=["production"],
        )
        async with App("memory://", jobs=[sweep]) as app:
            run = await app.enqueue(sweep, {})
            await app.run_worker(until_idle=True)
            record = await app.get_job(run.job_id)
            assert app.backend.backfills is not None
            assert await app.backend.backfills.rows() == []
        assert (record.attempt, handled) == (1, [])
        assert "XJOBS_BACKFILL_ENVIRONMENT" in (record.last_error or "")

    @pytest.mark.asyncio
    async def test_a_tenant_sweep_hands_its_tenant_to_fetch_and_handle(self) -> None:
        seen: list[str | None] = []

        async def fetch_for(cursor: Any, limit: int, tenant: str | None) -> Page[int]:
            seen.append(tenant)
            return Page([1], None)

        async def handle_for(items: list[int], tenant: str | None) -> None:
            seen.append(tenant)

        sweep = backfill(
            "fill_org",
            fetch=fetch_for,
            handle=handle_for,
            ledger=lambda: app.backend.backfills,
            tenant="input",
        )
        async with App("memory://", jobs=[sweep]) as app:
            run = await app.enqueue(sweep, {"tenant": "org-1"})
            await app.run_worker(until_idle=True)
            record = await app.get_job(run.job_id)
            assert app.backend.backfills is not None
            row = await app.backend.backfills.get(record.run_id)
        assert record.state == "completed", record.last_error
        assert seen == ["org-1", "org-1"]
        assert row is not None
        assert row.tenant == "org-1"
