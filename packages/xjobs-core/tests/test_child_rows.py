"""A child's id: the same on every replay, a valid UUID (version 8), in index order within its step."""

from __future__ import annotations

import uuid

import pytest
from pydantic import BaseModel

from xjobs import job
from xjobs.contract.children import MAX_GROUP_CHILDREN
from xjobs.errors import ChildrenInvalidError, ChildTenantMismatchError
from xjobs.ids import new_id
from xjobs.run.child_rows import ChildRows, checked_count, checked_handle, child_id


class Num(BaseModel):
    org: str
    n: int


@job(tenant=lambda i: i.org, idempotency_key=lambda i: str(i.n), queue="kids")
async def kid(ctx: object, input: Num) -> int:
    return input.n


def test_a_childs_id_is_the_same_on_every_replay_and_a_version_8_uuid() -> None:
    run_id = new_id()
    first = child_id(run_id, "fan", 7)
    parsed = uuid.UUID(first)
    assert first == child_id(run_id, "fan", 7)
    assert (parsed.version, parsed.variant) == (8, uuid.RFC_4122)
    assert first[:13] == run_id[:13], "the parent run's timestamp leads"


def test_the_children_of_one_step_sort_in_index_order() -> None:
    run_id = new_id()
    ids = [child_id(run_id, "fan", index) for index in range(0, MAX_GROUP_CHILDREN, 997)]
    assert ids == sorted(ids)
    assert len(set(ids)) == len(ids)


def test_another_step_or_run_gives_other_ids() -> None:
    run_id = new_id()
    assert child_id(run_id, "fan", 0) != child_id(run_id, "other", 0)
    assert child_id(run_id, "fan", 0) != child_id(new_id(), "fan", 0)


def test_every_input_is_checked_before_a_row_is_built() -> None:
    rows = ChildRows(kid, new_id(), "fan", "org-1")
    with pytest.raises(ChildTenantMismatchError, match="child 1"):
        rows.check([Num(org="org-1", n=0), Num(org="org-2", n=1)])


def test_a_row_is_keyed_by_its_place_never_by_its_input() -> None:
    run_id = new_id()
    rows = ChildRows(kid, run_id, "fan", "org-1")
    (row,) = rows.page(rows.check([Num(org="org-1", n=5)]), 3)
    assert (row.id, row.idempotency_key) == (child_id(run_id, "fan", 3), f"child:{row.id}")
    assert (row.queue, row.tenant_id) == ("kids", "org-1")


def test_more_children_than_a_step_holds_and_a_non_handle_are_refused() -> None:
    with pytest.raises(ChildrenInvalidError):
        checked_count(MAX_GROUP_CHILDREN + 1, "fan")
    with pytest.raises(ChildrenInvalidError):
        checked_handle(lambda: None, "fan")
