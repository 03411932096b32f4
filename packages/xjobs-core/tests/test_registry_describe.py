"""Registration stamps names from module attributes and refuses duplicates; `describe` projects to JSON."""

from __future__ import annotations

import json
import types
from datetime import timedelta
from typing import Any

import pytest
from pydantic import BaseModel

from xjobs import Concurrency, JobHandle, Retry, TaskHandle, job, task
from xjobs.declare.describe import describe, describe_job, describe_task
from xjobs.declare.registry import Registry
from xjobs.errors import DeclarationInvalidError, JobDuplicateError, JobNotRegisteredError


class Item(BaseModel):
    org_id: str
    item_id: str


async def body(ctx: object, input: Item) -> None:
    """One body shared by many handles; each `job()` call is its own handle."""


def make_job(**options: Any) -> JobHandle[Any]:
    options.setdefault("tenant", lambda i: i.org_id)
    options.setdefault("idempotency_key", lambda i: i.item_id)
    return job(body, **options)


def make_task(fires: JobHandle[Any], **options: Any) -> TaskHandle:
    return task(
        job=fires,
        cron="0 3 * * *",
        tz="Europe/Paris",
        input=lambda o: Item(org_id="o", item_id="i"),
        **options,
    )


def module(name: str = "fake_jobs", **exports: object) -> types.ModuleType:
    mod = types.ModuleType(name)
    for attr, value in exports.items():
        setattr(mod, attr, value)
    return mod


# -- names -----------------------------------------------------------------------------------


def test_a_job_is_named_by_the_attribute_its_module_exports_it_under() -> None:
    handle = make_job()
    registry = Registry(jobs=[module(send_invoice=handle)])
    assert list(registry.jobs) == ["send_invoice"]
    assert handle.name == "send_invoice"
    assert handle.stamped


def test_a_module_attribute_that_is_not_a_job_is_ignored() -> None:
    registry = Registry(jobs=[module(send=make_job(), helper=len, CONSTANT=3, model=Item)])
    assert list(registry.jobs) == ["send"]


def test_a_declared_name_wins_over_the_attribute_name() -> None:
    handle = make_job(name="billing.send")
    registry = Registry(jobs=[module(alias=handle)])
    assert list(registry.jobs) == ["billing.send"]
    assert handle.name == "billing.send"


def test_one_handle_exported_under_two_names_is_a_duplicate() -> None:
    handle = make_job()
    with pytest.raises(JobDuplicateError) as caught:
        Registry(jobs=[module(first=handle, second=handle)])
    assert caught.value.code == "XJOBS_JOB_DUPLICATE"
    assert "first" in caught.value.message
    assert "second" in caught.value.message


def test_two_different_handles_under_one_name_are_a_duplicate() -> None:
    with pytest.raises(JobDuplicateError) as caught:
        Registry(jobs=[module("a", send=make_job()), module("b", send=make_job())])
    assert caught.value.code == "XJOBS_JOB_DUPLICATE"
    assert "send" in caught.value.message


def test_two_handles_declaring_one_name_are_a_duplicate() -> None:
    with pytest.raises(JobDuplicateError) as caught:
        Registry(jobs=[module(one=make_job(name="send"), two=make_job(name="send"))])
    assert caught.value.code == "XJOBS_JOB_DUPLICATE"
    assert "send" in caught.value.message


def test_a_declared_name_colliding_with_an_attribute_name_is_a_duplicate() -> None:
    with pytest.raises(JobDuplicateError) as caught:
        Registry(jobs=[module(send=make_job(), other=make_job(name="send"))])
    assert caught.value.code == "XJOBS_JOB_DUPLICATE"


def test_the_same_handle_twice_is_one_registration() -> None:
    handle = make_job()
    mod = module(send=handle)
    registry = Registry(jobs=[mod, mod, handle])
    assert registry.jobs == {"send": handle}


def test_a_declared_name_exported_twice_is_one_registration() -> None:
    handle = make_job(name="billing.send")
    registry = Registry(jobs=[module(a=handle, b=handle)])
    assert registry.jobs == {"billing.send": handle}


def test_a_handle_passed_directly_keeps_its_function_name() -> None:
    handle = make_job()
    registry = Registry(jobs=[handle])
    assert list(registry.jobs) == ["body"]


def test_a_source_that_is_neither_module_nor_handle_is_refused() -> None:
    with pytest.raises(DeclarationInvalidError) as caught:
        Registry(jobs=["my_app.jobs"])
    assert caught.value.code == "XJOBS_DECLARATION_INVALID"
    assert "my_app.jobs" in caught.value.message


def test_a_handle_stamped_once_keeps_its_name() -> None:
    handle = make_job()
    handle.stamp("send")
    with pytest.raises(JobDuplicateError) as caught:
        handle.stamp("resend")
    assert caught.value.code == "XJOBS_JOB_DUPLICATE"
    assert handle.name == "send"


def test_a_stamped_name_is_validated() -> None:
    handle = make_job()
    with pytest.raises(DeclarationInvalidError) as caught:
        handle.stamp("not a name")
    assert caught.value.code == "XJOBS_DECLARATION_INVALID"


# -- order -----------------------------------------------------------------------------------


def test_jobs_are_listed_by_code_point() -> None:
    registry = Registry(
        jobs=[module(a=make_job(), B=make_job(), _x=make_job(), Z=make_job(), b=make_job())]
    )
    assert list(registry.jobs) == ["B", "Z", "_x", "a", "b"]


def test_tasks_are_listed_by_code_point() -> None:
    fires = make_job()
    registry = Registry(
        jobs=[module(report=fires)],
        tasks=[module(nightly=make_task(fires), Hourly=make_task(fires), _weekly=make_task(fires))],
    )
    assert list(registry.tasks) == ["Hourly", "_weekly", "nightly"]


def test_queues_are_listed_once_each_sorted() -> None:
    registry = Registry(
        jobs=[module(a=make_job(queue="zeta"), b=make_job(queue="Alpha"), c=make_job(queue="zeta"))]
    )
    assert registry.queues() == ["Alpha", "zeta"]


# -- tasks -----------------------------------------------------------------------------------


def test_a_task_is_named_by_its_module_attribute() -> None:
    fires = make_job()
    nightly = make_task(fires)
    registry = Registry(jobs=[module(report=fires)], tasks=[module(nightly=nightly)])
    assert list(registry.tasks) == ["nightly"]
    assert nightly.name == "nightly"


def test_a_task_registers_the_job_it_fires() -> None:
    fires = make_job(name="report")
    registry = Registry(jobs=[module(zzz=make_job())], tasks=[module(nightly=make_task(fires))])
    assert list(registry.jobs) == ["report", "zzz"]
    assert registry.jobs["report"] is fires


def test_a_task_firing_another_handle_under_a_registered_name_is_a_duplicate() -> None:
    registered = make_job(name="report")
    impostor = make_job(name="report")
    with pytest.raises(JobDuplicateError) as caught:
        Registry(jobs=[module(report=registered)], tasks=[module(nightly=make_task(impostor))])
    assert caught.value.code == "XJOBS_JOB_DUPLICATE"
    assert "report" in caught.value.message


def test_two_different_tasks_under_one_name_are_a_duplicate() -> None:
    fires = make_job(name="report")
    with pytest.raises(JobDuplicateError) as caught:
        Registry(
            tasks=[module("a", nightly=make_task(fires)), module("b", nightly=make_task(fires))]
        )
    assert caught.value.code == "XJOBS_JOB_DUPLICATE"
    assert "nightly" in caught.value.message


# -- lookups ---------------------------------------------------------------------------------


def test_a_registered_job_is_found_by_name() -> None:
    handle = make_job()
    registry = Registry(jobs=[module(send=handle)])
    assert registry.job("send") is handle
    assert registry.owns(handle)


def test_an_unknown_job_name_is_refused_listing_the_known_ones() -> None:
    registry = Registry(jobs=[module(send=make_job(), resend=make_job())])
    with pytest.raises(JobNotRegisteredError) as caught:
        registry.job("nope")
    assert caught.value.code == "XJOBS_JOB_NOT_REGISTERED"
    assert "nope" in caught.value.message
    assert "resend, send" in caught.value.message


def test_a_registry_does_not_own_a_foreign_handle_of_the_same_name() -> None:
    registry = Registry(jobs=[module(send=make_job(name="send"))])
    assert not registry.owns(make_job(name="send"))


# -- describe --------------------------------------------------------------------------------


def full_registry() -> Registry:
    keyed = make_job(
        queue="billing",
        priority=3,
        retry=Retry(
            attempts=4, base=timedelta(seconds=2), cap=timedelta(minutes=1), dead_letter=False
        ),
        timeout=timedelta(minutes=5),
        step_timeout=timedelta(seconds=30),
        event_poll=timedelta(seconds=2),
        concurrency=Concurrency(key=lambda i: i.org_id, limit=2, when_busy="fail"),
        redact_input=lambda i: {"org_id": i.org_id},
    )
    fleet = make_job(tenant="none", concurrency=0)
    return Registry(
        jobs=[module(send_invoice=keyed, Audit=fleet, _cleanup=make_job(), zeta=make_job())],
        tasks=[module(nightly=make_task(fleet, catch_up="all", max_catch_up=5))],
    )


def test_describe_is_json_serialisable() -> None:
    registry = full_registry()
    data = describe(registry.jobs, registry.tasks)
    assert json.loads(json.dumps(data)) == data


def test_describe_lists_jobs_and_tasks_sorted_by_name() -> None:
    registry = full_registry()
    data = describe(registry.jobs, registry.tasks)
    assert [j["name"] for j in data["jobs"]] == ["Audit", "_cleanup", "send_invoice", "zeta"]
    assert [t["name"] for t in data["tasks"]] == ["nightly"]


def test_describe_sorts_even_an_unsorted_mapping() -> None:
    handles = {name: make_job(name=name) for name in ["b", "a", "_c", "C"]}
    assert [j["name"] for j in describe(handles, {})["jobs"]] == ["C", "_c", "a", "b"]


def test_describe_job_shows_the_resolved_options() -> None:
    registry = full_registry()
    described = describe_job(registry.jobs["send_invoice"])
    assert described == {
        "concurrency": {"keyed": True, "limit": 2, "when_busy": "fail"},
        "event_poll_ms": 2000,
        "input_schema": Item.model_json_schema(),
        "kind": "job",
        "name": "send_invoice",
        "priority": 3,
        "queue": "billing",
        "redacts": {"input": True, "key": False, "steps": False},
        "redacts_input": True,
        "retry": {"attempts": 4, "base_ms": 2000, "cap_ms": 60_000, "dead_letter": False},
        "step_timeout_ms": 30_000,
        "tenant": "derived",
        "timeout_ms": 300_000,
    }


def test_describe_job_shows_a_hard_stop_and_a_cross_tenant_job() -> None:
    described = describe_job(full_registry().jobs["Audit"])
    assert described["concurrency"] == {"keyed": False, "limit": 0, "when_busy": None}
    assert described["tenant"] == "none"
    assert described["redacts_input"] is False


def test_describe_task_shows_its_schedule() -> None:
    registry = full_registry()
    assert describe_task(registry.tasks["nightly"]) == {
        "catch_up": "all",
        "cron": "0 3 * * *",
        "job": "Audit",
        "kind": "task",
        "max_catch_up": 5,
        "name": "nightly",
        "tz": "Europe/Paris",
    }


def test_describe_never_exposes_a_callable() -> None:
    registry = full_registry()
    text = json.dumps(describe(registry.jobs, registry.tasks))
    assert "lambda" not in text
    assert "function" not in text
