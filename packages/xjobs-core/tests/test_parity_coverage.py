"""Meta-tests: every driver operation, store operation and hook spec is exercised by the parity suite."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

import xjobs.testing.parity as parity_package
from xjobs.contract import hookspecs
from xjobs.contract.driver import JobDriver
from xjobs.contract.stores import (
    EventBus,
    LeaderElection,
    OutboxStore,
    SchedulerState,
    SlotStore,
    StepStore,
    WorkerRegistry,
)
from xjobs.run.ack_batch import BatchAck

PARITY_SOURCE = "\n".join(
    path.read_text() for path in Path(parity_package.__file__).parent.rglob("test_*.py")
)


def _operations(protocol: type) -> list[str]:
    return sorted(
        name
        for name, member in vars(protocol).items()
        if not name.startswith("_") and inspect.iscoroutinefunction(member)
    )


@pytest.mark.parametrize(
    "operation",
    [f"JobDriver.{op}" for op in _operations(JobDriver)]
    + [f"BatchAck.{op}" for op in _operations(BatchAck)]
    + [f"WorkerRegistry.{op}" for op in _operations(WorkerRegistry)]
    + [f"SlotStore.{op}" for op in _operations(SlotStore)]
    + [f"StepStore.{op}" for op in _operations(StepStore)]
    + [f"EventBus.{op}" for op in _operations(EventBus)]
    + [f"SchedulerState.{op}" for op in _operations(SchedulerState)]
    + [f"LeaderElection.{op}" for op in _operations(LeaderElection)]
    + [f"OutboxStore.{op}" for op in _operations(OutboxStore)],
)
def test_every_implemented_store_operation_has_a_parity_scenario(operation: str) -> None:
    method = operation.split(".")[1]
    assert f".{method}(" in PARITY_SOURCE, f"no parity scenario calls {operation}"


def test_every_hook_spec_is_implemented_by_the_built_in_backend() -> None:
    from xjobs.memory import plugin

    specs = [name for name in vars(hookspecs) if name.startswith("xjobs_")]
    assert specs
    for spec in specs:
        assert hasattr(plugin, spec), f"the memory plugin does not implement {spec}"
