"""Meta-tests: every driver operation, store operation and hook spec is exercised by the parity suite.

The parity suite runs once on the memory backend in a subprocess whose stores record every call
that reaches them from outside the memory package; an operation no scenario reaches fails here.
"""

from __future__ import annotations

import importlib
import inspect
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from xjobs.contract import hookspecs
from xjobs.contract.backfills import BackfillLedger
from xjobs.contract.children import ChildStore
from xjobs.contract.driver import BatchAck, JobDriver
from xjobs.contract.introspection import JobIntrospection
from xjobs.contract.rates import RateStore
from xjobs.contract.results import ResultStore
from xjobs.contract.retention import RetentionStore
from xjobs.contract.stores import (
    EventBus,
    LeaderElection,
    OutboxStore,
    SchedulerState,
    SlotStore,
    StepStore,
    WorkerRegistry,
)
from xjobs.contract.webhooks import WebhookLedger

PROTOCOLS: dict[str, type] = {
    "JobDriver": JobDriver,
    "BatchAck": BatchAck,
    "WorkerRegistry": WorkerRegistry,
    "SlotStore": SlotStore,
    "StepStore": StepStore,
    "EventBus": EventBus,
    "SchedulerState": SchedulerState,
    "LeaderElection": LeaderElection,
    "OutboxStore": OutboxStore,
    "JobIntrospection": JobIntrospection,
    "RetentionStore": RetentionStore,
    "WebhookLedger": WebhookLedger,
    "RateStore": RateStore,
    "ResultStore": ResultStore,
    "BackfillLedger": BackfillLedger,
    "ChildStore": ChildStore,
}

# Each protocol's memory implementation, by "module:class".
MEMORY = {
    "JobDriver": "xjobs.memory.driver:MemoryJobDriver",
    "BatchAck": "xjobs.memory.driver:MemoryJobDriver",
    "WorkerRegistry": "xjobs.memory.workers:MemoryWorkerRegistry",
    "SlotStore": "xjobs.memory.slots:MemorySlotStore",
    "StepStore": "xjobs.memory.steps:MemoryStepStore",
    "EventBus": "xjobs.memory.events:MemoryEventBus",
    "SchedulerState": "xjobs.memory.scheduler:MemorySchedulerState",
    "LeaderElection": "xjobs.memory.scheduler:MemoryLeader",
    "OutboxStore": "xjobs.memory.outbox:MemoryOutboxStore",
    "JobIntrospection": "xjobs.memory.introspection:MemoryIntrospection",
    "RetentionStore": "xjobs.memory.retention:MemoryRetention",
    "WebhookLedger": "xjobs.memory.webhooks:MemoryWebhookLedger",
    "RateStore": "xjobs.memory.rates:MemoryRateStore",
    "ResultStore": "xjobs.memory.results:MemoryResults",
    "BackfillLedger": "xjobs.memory.backfills:MemoryBackfillLedger",
    "ChildStore": "xjobs.memory.children:MemoryChildStore",
}

# Protocols of the contract that no backend store implements: the purge job's targets (core's
# StoreTarget, over RetentionStore) and the synchronous face of an in-process rate store.
NOT_A_STORE = {"PurgeTarget", "InProcessRates"}

RECORDER = textwrap.dedent(
    """
    import functools, importlib, json, sys
    import pytest

    operations, memory, out = json.loads(sys.argv[1]), json.loads(sys.argv[2]), sys.argv[3]
    called = set()

    def record(cls, label, name):
        fn = getattr(cls, name)

        @functools.wraps(fn)
        async def recorded(self, *args, **kwargs):
            caller = sys._getframe(1).f_globals.get("__name__", "")
            if not caller.startswith("xjobs.memory"):
                called.add(label)
            return await fn(self, *args, **kwargs)

        setattr(cls, name, recorded)

    for protocol, names in operations.items():
        module, _, attr = memory[protocol].partition(":")
        cls = getattr(importlib.import_module(module), attr)
        for name in names:
            record(cls, f"{protocol}.{name}", name)
    code = pytest.main(
        ["-q", "-p", "no:cacheprovider", "--pyargs", "xjobs.testing.parity",
         "--xjobs-backend=memory"]
    )
    with open(out, "w") as f:
        json.dump(sorted(called), f)
    sys.exit(int(code))
    """
)


def _operations(protocol: type) -> list[str]:
    return sorted(
        name
        for name, member in vars(protocol).items()
        if not name.startswith("_") and inspect.iscoroutinefunction(member)
    )


OPERATIONS = {name: _operations(protocol) for name, protocol in PROTOCOLS.items()}


@pytest.fixture(scope="module")
def reached(tmp_path_factory: pytest.TempPathFactory) -> set[str]:
    """Every `Protocol.operation` a parity scenario (or the core it drives) called on memory."""
    out = tmp_path_factory.mktemp("parity-calls") / "called.json"
    empty = tmp_path_factory.mktemp("parity-run")
    (empty / "pytest.ini").write_text("[pytest]\n")
    run = subprocess.run(
        [sys.executable, "-c", RECORDER, json.dumps(OPERATIONS), json.dumps(MEMORY), str(out)],
        cwd=empty,
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    return set(json.loads(Path(out).read_text()))


@pytest.mark.parametrize(
    "operation", [f"{name}.{op}" for name, ops in OPERATIONS.items() for op in ops]
)
def test_every_store_operation_is_reached_by_a_parity_scenario(
    reached: set[str], operation: str
) -> None:
    assert operation in reached, f"no parity scenario reaches {operation}"


def test_every_hook_spec_is_implemented_by_the_built_in_backend() -> None:
    from xjobs.memory import plugin

    specs = [name for name in vars(hookspecs) if name.startswith("xjobs_")]
    assert specs
    for spec in specs:
        assert hasattr(plugin, spec), f"the memory plugin does not implement {spec}"


def test_every_store_protocol_of_the_contract_is_covered() -> None:
    import xjobs.contract as contract

    found = set()
    for path in Path(contract.__file__).parent.glob("*.py"):
        module = importlib.import_module(f"xjobs.contract.{path.stem}")
        for name, value in vars(module).items():
            if (
                inspect.isclass(value)
                and value.__module__ == module.__name__
                and getattr(value, "_is_protocol", False)
                and _operations(value)
            ):
                found.add(name)
    assert found - NOT_A_STORE == set(PROTOCOLS)
