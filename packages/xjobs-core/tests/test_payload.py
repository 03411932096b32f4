"""Inputs are validated by their model and stored as JSON every backend accepts; the facade enqueues (payload.py, facade.py)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import pytest_asyncio
from pydantic import BaseModel, ValidationError

import xjobs
from xjobs import JobHandle, ManualClock, job
from xjobs.actor import Actor, reset_actor, run_with_context, set_actor, set_traceparent
from xjobs.contract.backend import Backend
from xjobs.contract.driver import ClaimOptions, EnqueueResult, JobDriver, JobRecord, NewJob
from xjobs.declare.job import EnqueueOptions
from xjobs.declare.keys import MAX_KEY_CHARS, derive_str
from xjobs.declare.task import validate_tz
from xjobs.enqueue.facade import JobsFacade
from xjobs.errors import (
    InputInvalidError,
    KeyUnderivableError,
    OptionInvalidError,
    PayloadInvalidError,
    TimeZoneInvalidError,
)
from xjobs.payload import (
    DEFAULT_MAX_PAYLOAD_BYTES,
    MAX_PAYLOAD_DEPTH,
    check_json_values,
    decode_input,
    decode_payload,
    encode_payload,
    validate_input,
)

START_MS = 1_767_225_600_000
TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


class Note(BaseModel):
    org_id: str = "org-in"
    note_id: str = "n1"
    text: str = ""
    tags: dict[str, str] = {}


async def save_note(ctx: object, input: Note) -> None:
    """The job every facade test enqueues."""


def note_job(**options: Any) -> JobHandle[Any]:
    options.setdefault("tenant", lambda i: i.org_id)
    options.setdefault("idempotency_key", lambda i: i.note_id)
    return job(save_note, **options)


def assert_payload_refused(
    caught: pytest.ExceptionInfo[PayloadInvalidError], job_name: str
) -> None:
    assert caught.value.code == "XJOBS_PAYLOAD_INVALID"
    assert job_name in caught.value.message


# -- validate_input --------------------------------------------------------------------------


def test_a_model_instance_is_taken_as_it_is() -> None:
    note = Note(text="hi")
    assert validate_input(Note, note, job="save_note") is note


def test_a_dict_is_validated_into_the_model() -> None:
    assert validate_input(Note, {"text": "hi"}, job="save_note") == Note(text="hi")


@pytest.mark.parametrize("value", [{"text": 5}, None, "text", {"tags": {"a": 1}}], ids=repr)
def test_an_invalid_input_is_refused_naming_the_job(value: object) -> None:
    with pytest.raises(InputInvalidError) as caught:
        validate_input(Note, value, job="save_note")
    assert caught.value.code == "XJOBS_INPUT_INVALID"
    assert "save_note" in caught.value.message
    assert isinstance(caught.value.__cause__, ValidationError)


def test_an_invalid_input_names_the_field() -> None:
    with pytest.raises(InputInvalidError) as caught:
        validate_input(Note, {"text": 5}, job="save_note")
    assert "text" in caught.value.message


def test_a_stored_input_that_no_longer_validates_is_refused_naming_the_job() -> None:
    with pytest.raises(InputInvalidError) as caught:
        decode_input(Note, '{"text": 5}', job="save_note")
    assert caught.value.code == "XJOBS_INPUT_INVALID"
    assert "save_note" in caught.value.message


def test_a_stored_input_that_is_not_json_is_refused() -> None:
    with pytest.raises(InputInvalidError) as caught:
        decode_input(Note, "not json", job="save_note")
    assert caught.value.code == "XJOBS_INPUT_INVALID"


def test_a_stored_payload_round_trips() -> None:
    note = Note(text="héllo 😀", tags={"k": "v"})
    text = encode_payload(note, job="save_note")
    assert decode_input(Note, text, job="save_note") == note
    assert decode_payload(text) == json.loads(note.model_dump_json())


# -- encode_payload --------------------------------------------------------------------------


def test_a_nul_in_a_value_is_refused() -> None:
    with pytest.raises(PayloadInvalidError) as caught:
        encode_payload(Note(text="a\x00b"), job="save_note")
    assert_payload_refused(caught, "save_note")
    assert "NUL" in caught.value.message


def test_a_nul_in_a_key_is_refused() -> None:
    with pytest.raises(PayloadInvalidError) as caught:
        encode_payload(Note(tags={"a\x00": "b"}), job="save_note")
    assert_payload_refused(caught, "save_note")
    assert "NUL" in caught.value.message


def test_a_lone_surrogate_in_a_value_is_refused() -> None:
    with pytest.raises(PayloadInvalidError) as caught:
        encode_payload(Note(text="\ud800"), job="save_note")
    assert_payload_refused(caught, "save_note")


def test_a_lone_surrogate_in_a_key_is_refused() -> None:
    with pytest.raises(PayloadInvalidError) as caught:
        encode_payload(Note(tags={"\udc00": "x"}), job="save_note")
    assert_payload_refused(caught, "save_note")


def test_a_surrogate_pair_is_an_ordinary_character() -> None:
    assert json.loads(encode_payload(Note(text="\U0001f600"), job="save_note"))["text"] == "😀"


def test_a_nul_deep_inside_nested_values_is_refused() -> None:
    with pytest.raises(PayloadInvalidError) as caught:
        check_json_values({"a": [1, {"b": ("ok", "x\x00y")}]}, what="payload of job 'save_note'")
    assert_payload_refused(caught, "save_note")


def test_a_lone_surrogate_in_a_nested_key_is_refused() -> None:
    with pytest.raises(PayloadInvalidError) as caught:
        check_json_values([{"fine": {"\ud800": 1}}], what="payload of job 'save_note'")
    assert_payload_refused(caught, "save_note")
    assert "surrogate" in caught.value.message


def test_a_literal_backslash_u0000_in_a_string_is_not_a_nul() -> None:
    # The six characters \u0000 inside a string are stored as "\\u0000": jsonb accepts that.
    text = encode_payload(Note(text="\\u0000"), job="save_note")
    assert json.loads(text)["text"] == "\\u0000"


def test_a_payload_over_the_limit_is_refused() -> None:
    with pytest.raises(PayloadInvalidError) as caught:
        encode_payload(Note(text="x" * 100), job="save_note", max_bytes=50)
    assert_payload_refused(caught, "save_note")
    assert "50" in caught.value.message


def test_a_payload_exactly_at_the_limit_is_accepted() -> None:
    note = Note(text="x" * 10)
    size = len(note.model_dump_json().encode("utf-8"))
    assert encode_payload(note, job="save_note", max_bytes=size) == note.model_dump_json()
    with pytest.raises(PayloadInvalidError):
        encode_payload(note, job="save_note", max_bytes=size - 1)


def test_the_limit_counts_utf8_bytes_not_characters() -> None:
    note = Note(text="é" * 10)
    chars = len(note.model_dump_json())
    with pytest.raises(PayloadInvalidError) as caught:
        encode_payload(note, job="save_note", max_bytes=chars)
    assert_payload_refused(caught, "save_note")


def test_the_default_limit_is_one_mebibyte() -> None:
    assert DEFAULT_MAX_PAYLOAD_BYTES == 1024 * 1024
    with pytest.raises(PayloadInvalidError):
        encode_payload(Note(text="x" * DEFAULT_MAX_PAYLOAD_BYTES), job="save_note")


# -- the jobs facade -------------------------------------------------------------------------


class RecordingDriver:
    """The memory driver, counting the enqueue calls that reached it."""

    def __init__(self, inner: JobDriver) -> None:
        self.inner = inner
        self.enqueue_calls: list[list[NewJob]] = []

    async def enqueue(self, jobs: Sequence[NewJob]) -> list[EnqueueResult]:
        self.enqueue_calls.append(list(jobs))
        return await self.inner.enqueue(jobs)


@pytest_asyncio.fixture
async def backend() -> AsyncIterator[Backend]:
    opened = await xjobs.connect("memory://", clock=ManualClock(START_MS))
    try:
        yield opened
    finally:
        await opened.close()


@pytest.fixture
def driver(backend: Backend) -> RecordingDriver:
    return RecordingDriver(backend.jobs)


@pytest.fixture
def facade(backend: Backend, driver: RecordingDriver) -> JobsFacade:
    return JobsFacade(driver, backend.clock, max_payload_bytes=DEFAULT_MAX_PAYLOAD_BYTES)  # type: ignore[arg-type]


async def rows_in(backend: Backend, queue: str = "default") -> int:
    """How many jobs a claim can see (it takes them: call once, at the end)."""
    result = await backend.jobs.claim(
        ClaimOptions(worker_id="counter", queues={queue: 10_000}, lease_ms=60_000)
    )
    return len(result.jobs)


async def enqueue_one(
    facade: JobsFacade, handle: JobHandle[Any], value: object, backend: Backend
) -> JobRecord:
    (result,) = await facade.enqueue_inputs(handle, [value], EnqueueOptions())
    record = await backend.jobs.get(result.job_id)
    assert record is not None
    return record


@pytest.mark.asyncio
async def test_connect_memory_gives_a_fresh_store(backend: Backend) -> None:
    assert backend.name == "memory"
    assert await rows_in(backend) == 0


@pytest.mark.asyncio
async def test_the_facade_enqueues_one_row_per_input_in_order(
    facade: JobsFacade, backend: Backend, driver: RecordingDriver
) -> None:
    handle = note_job()
    results = await facade.enqueue_inputs(
        handle, [Note(note_id="a"), {"note_id": "b"}, Note(note_id="c")], EnqueueOptions()
    )
    assert len(driver.enqueue_calls) == 1  # one round trip for the batch
    keys = []
    for result in results:
        record = await backend.jobs.get(result.job_id)
        assert record is not None
        keys.append(record.idempotency_key)
    assert keys == ["a", "b", "c"]
    assert await rows_in(backend) == 3


@pytest.mark.asyncio
async def test_a_bad_third_input_leaves_no_rows(
    facade: JobsFacade, backend: Backend, driver: RecordingDriver
) -> None:
    handle = note_job()
    batch = [Note(note_id="a"), {"note_id": "b"}, {"note_id": "c", "text": 5}, Note(note_id="d")]
    with pytest.raises(InputInvalidError) as caught:
        await facade.enqueue_inputs(handle, batch, EnqueueOptions())
    assert caught.value.code == "XJOBS_INPUT_INVALID"
    assert "save_note" in caught.value.message
    assert driver.enqueue_calls == []
    assert await rows_in(backend) == 0


@pytest.mark.asyncio
async def test_a_third_input_with_a_nul_leaves_no_rows(
    facade: JobsFacade, backend: Backend, driver: RecordingDriver
) -> None:
    handle = note_job()
    batch = [Note(note_id="a"), Note(note_id="b"), Note(note_id="c", text="\x00")]
    with pytest.raises(PayloadInvalidError) as caught:
        await facade.enqueue_inputs(handle, batch, EnqueueOptions())
    assert_payload_refused(caught, "save_note")
    assert driver.enqueue_calls == []
    assert await rows_in(backend) == 0


@pytest.mark.asyncio
async def test_a_third_input_with_an_underivable_key_leaves_no_rows(
    facade: JobsFacade, backend: Backend, driver: RecordingDriver
) -> None:
    handle = note_job()
    batch = [Note(note_id="a"), Note(note_id="b"), Note(note_id="")]
    with pytest.raises(KeyUnderivableError) as caught:
        await facade.enqueue_inputs(handle, batch, EnqueueOptions())
    assert caught.value.code == "XJOBS_KEY_UNDERIVABLE"
    assert driver.enqueue_calls == []
    assert await rows_in(backend) == 0


@pytest.mark.asyncio
async def test_a_third_input_with_an_underivable_tenant_leaves_no_rows(
    facade: JobsFacade, backend: Backend, driver: RecordingDriver
) -> None:
    handle = note_job()
    batch = [Note(note_id="a"), Note(note_id="b"), Note(note_id="c", org_id="")]
    with pytest.raises(KeyUnderivableError) as caught:
        await facade.enqueue_inputs(handle, batch, EnqueueOptions())
    assert caught.value.code == "XJOBS_KEY_UNDERIVABLE"
    assert "tenant" in caught.value.message
    assert driver.enqueue_calls == []
    assert await rows_in(backend) == 0


@pytest.mark.asyncio
async def test_a_lone_surrogate_input_is_refused_at_enqueue(
    facade: JobsFacade, backend: Backend, driver: RecordingDriver
) -> None:
    handle = note_job()
    with pytest.raises(PayloadInvalidError) as caught:
        await facade.enqueue_inputs(
            handle, [Note(note_id="a"), Note(text="\ud800")], EnqueueOptions()
        )
    assert_payload_refused(caught, "save_note")
    assert driver.enqueue_calls == []


@pytest.mark.asyncio
async def test_an_oversized_input_is_refused_at_enqueue(backend: Backend) -> None:
    small = JobsFacade(backend.jobs, backend.clock, max_payload_bytes=64)
    with pytest.raises(PayloadInvalidError) as caught:
        await small.enqueue_inputs(note_job(), [Note(text="x" * 100)], EnqueueOptions())
    assert_payload_refused(caught, "save_note")
    assert await rows_in(backend) == 0


@pytest.mark.asyncio
async def test_an_empty_batch_writes_nothing(facade: JobsFacade, driver: RecordingDriver) -> None:
    assert await facade.enqueue_inputs(note_job(), [], EnqueueOptions()) == []
    assert driver.enqueue_calls == []


@pytest.mark.asyncio
async def test_the_payload_is_the_input_json(facade: JobsFacade, backend: Backend) -> None:
    record = await enqueue_one(facade, note_job(), {"note_id": "a", "text": "hi"}, backend)
    assert json.loads(record.payload) == Note(note_id="a", text="hi").model_dump()


@pytest.mark.asyncio
async def test_the_row_carries_the_declared_retry_and_priority(
    facade: JobsFacade, backend: Backend
) -> None:
    handle = note_job(priority=4, retry=xjobs.Retry(attempts=2, dead_letter=False), queue="notes")
    record = await enqueue_one(facade, handle, Note(), backend)
    assert (record.queue, record.priority, record.max_attempts, record.dead_letter) == (
        "notes",
        4,
        2,
        False,
    )


@pytest.mark.asyncio
async def test_enqueued_by_is_the_ambient_user(facade: JobsFacade, backend: Backend) -> None:
    token = set_actor(Actor(org_id="org-actor", user_id="user-1"))
    try:
        record = await enqueue_one(facade, note_job(), Note(org_id="org-actor"), backend)
    finally:
        reset_actor(token)
    assert record.enqueued_by == "user-1"


@pytest.mark.asyncio
async def test_enqueued_by_is_the_ambient_org_without_a_user(
    facade: JobsFacade, backend: Backend
) -> None:
    record = await run_with_context(
        Actor(org_id="org-actor"),
        lambda: enqueue_one(facade, note_job(), Note(org_id="org-actor"), backend),
    )
    assert record.enqueued_by == "org-actor"


@pytest.mark.asyncio
async def test_the_row_tenant_is_the_input_org_not_the_enqueuer(
    facade: JobsFacade, backend: Backend
) -> None:
    record = await run_with_context(
        Actor(user_id="user-1"),
        lambda: enqueue_one(facade, note_job(), Note(org_id="org-in"), backend),
    )
    assert (record.tenant_id, record.enqueued_by) == ("org-in", "user-1")


@pytest.mark.asyncio
async def test_without_an_actor_the_row_has_the_jobs_tenant_and_no_enqueuer(
    facade: JobsFacade, backend: Backend
) -> None:
    record = await enqueue_one(facade, note_job(), Note(), backend)
    assert (record.tenant_id, record.enqueued_by) == ("org-in", None)


@pytest.mark.asyncio
async def test_the_traceparent_of_the_current_span_is_stamped(
    facade: JobsFacade, backend: Backend
) -> None:
    token = set_traceparent(TRACEPARENT)
    try:
        record = await enqueue_one(facade, note_job(), Note(), backend)
    finally:
        token.var.reset(token)
    assert record.traceparent == TRACEPARENT


@pytest.mark.asyncio
async def test_no_traceparent_is_stamped_when_the_span_id_is_all_zeros(
    facade: JobsFacade, backend: Backend
) -> None:
    token = set_traceparent("00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01")
    try:
        record = await enqueue_one(facade, note_job(), Note(), backend)
    finally:
        token.var.reset(token)
    assert record.traceparent is None


@pytest.mark.asyncio
async def test_no_traceparent_is_stamped_outside_a_span(
    facade: JobsFacade, backend: Backend
) -> None:
    record = await enqueue_one(facade, note_job(), Note(), backend)
    assert record.traceparent is None


@pytest.mark.asyncio
async def test_a_live_namespace_dedupes(facade: JobsFacade) -> None:
    handle = note_job()
    (first,) = await facade.enqueue_inputs(handle, [Note(note_id="a")], EnqueueOptions())
    (again,) = await facade.enqueue_inputs(handle, [Note(note_id="a")], EnqueueOptions())
    assert (again.job_id, again.run_id, again.deduped) == (first.job_id, first.run_id, True)
    assert not first.deduped


@pytest.mark.asyncio
async def test_a_delay_sets_run_at_from_the_clock(facade: JobsFacade, backend: Backend) -> None:
    (result,) = await facade.enqueue_inputs(
        note_job(), [Note()], EnqueueOptions(delay=timedelta(seconds=30))
    )
    record = await backend.jobs.get(result.job_id)
    assert record is not None
    assert record.run_at_ms == START_MS + 30_000


@pytest.mark.asyncio
async def test_run_at_is_an_aware_instant(facade: JobsFacade, backend: Backend) -> None:
    when = datetime(2026, 6, 1, 12, tzinfo=UTC)
    (result,) = await facade.enqueue_inputs(note_job(), [Note()], EnqueueOptions(run_at=when))
    record = await backend.jobs.get(result.job_id)
    assert record is not None
    assert record.run_at_ms == int(when.timestamp() * 1000)


@pytest.mark.asyncio
async def test_a_naive_run_at_is_refused(facade: JobsFacade, driver: RecordingDriver) -> None:
    with pytest.raises(OptionInvalidError) as caught:
        await facade.enqueue_inputs(
            note_job(), [Note()], EnqueueOptions(run_at=datetime(2026, 6, 1))
        )
    assert caught.value.code == "XJOBS_OPTION_INVALID"
    assert "run_at" in caught.value.message
    assert driver.enqueue_calls == []


@pytest.mark.asyncio
async def test_delay_and_run_at_together_are_refused(facade: JobsFacade) -> None:
    options = EnqueueOptions(delay=timedelta(seconds=1), run_at=datetime(2026, 6, 1, tzinfo=UTC))
    with pytest.raises(OptionInvalidError) as caught:
        await facade.enqueue_inputs(note_job(), [Note()], options)
    assert caught.value.code == "XJOBS_OPTION_INVALID"
    assert "delay" in caught.value.message
    assert "run_at" in caught.value.message


@pytest.mark.asyncio
async def test_a_negative_delay_is_refused(facade: JobsFacade) -> None:
    with pytest.raises(OptionInvalidError) as caught:
        await facade.enqueue_inputs(
            note_job(), [Note()], EnqueueOptions(delay=timedelta(seconds=-1))
        )
    assert caught.value.code == "XJOBS_OPTION_INVALID"
    assert "delay" in caught.value.message


@pytest.mark.asyncio
@pytest.mark.parametrize("priority", [-1, 10, 2.5])
async def test_a_per_call_priority_out_of_range_is_refused(
    facade: JobsFacade, priority: Any
) -> None:
    with pytest.raises(OptionInvalidError) as caught:
        await facade.enqueue_inputs(note_job(), [Note()], EnqueueOptions(priority=priority))
    assert caught.value.code == "XJOBS_OPTION_INVALID"
    assert "priority" in caught.value.message


@pytest.mark.asyncio
async def test_a_per_call_priority_overrides_the_declared_one(
    facade: JobsFacade, backend: Backend
) -> None:
    (result,) = await facade.enqueue_inputs(
        note_job(priority=1), [Note()], EnqueueOptions(priority=7)
    )
    record = await backend.jobs.get(result.job_id)
    assert record is not None
    assert record.priority == 7


@pytest.mark.asyncio
async def test_a_bound_handle_enqueues_through_the_facade(
    facade: JobsFacade, backend: Backend
) -> None:
    handle = note_job()
    handle.bind(facade)
    try:
        single = await handle.enqueue({"note_id": "a"})
        many = await handle.enqueue_many([Note(note_id="b"), Note(note_id="c")])
    finally:
        handle.bind(None)
    assert not single.deduped
    assert len(many) == 2
    assert await rows_in(backend) == 3


@pytest.mark.asyncio
async def test_a_bound_handle_refuses_a_bad_input_naming_its_job(facade: JobsFacade) -> None:
    handle = note_job(name="notes.save")
    handle.bind(facade)
    try:
        with pytest.raises(InputInvalidError) as caught:
            await handle.enqueue({"text": ["not", "text"]})
    finally:
        handle.bind(None)
    assert caught.value.code == "XJOBS_INPUT_INVALID"
    assert "notes.save" in caught.value.message


class Loose(BaseModel):
    """An input with an `Any` field and bytes, where hostile values hide."""

    value: Any = None
    ratio: float = 0.0
    blob: bytes = b""


class Opaque:
    """An object JSON cannot carry."""


def _nested(depth: int) -> dict[str, Any]:
    root: dict[str, Any] = {}
    node = root
    for _ in range(depth - 1):
        node["a"] = {}
        node = node["a"]
    return root


@pytest.mark.parametrize(
    ("value", "refusal"),
    [
        (Loose(value=float("nan")), "finite"),
        (Loose(value={"deep": [float("-inf")]}), "finite"),
        (Loose(ratio=float("inf")), "finite"),
        (Loose(value=10**5000 - 1), "bits"),
        (Loose(value=_nested(MAX_PAYLOAD_DEPTH + 1)), "nested deeper"),
        (Loose(value=_nested(10_000)), "nested deeper"),
        (Loose(value=Opaque()), "cannot be stored as JSON"),
        (Loose(blob=b"\xff\xfe"), "cannot be stored as JSON"),
    ],
    ids=["nan", "inf-nested", "inf-field", "huge-int", "too-deep", "very-deep", "object", "bytes"],
)
def test_what_a_run_could_not_decode_exactly_is_refused_at_the_door(
    value: Loose, refusal: str
) -> None:
    with pytest.raises(PayloadInvalidError) as refused:
        encode_payload(value, job="hostile")
    assert refusal in refused.value.message


def test_nesting_within_the_bound_and_a_long_integer_round_trip_exactly() -> None:
    value = Loose(value={"n": 10**3000 - 1, "tree": _nested(MAX_PAYLOAD_DEPTH - 2)})
    text = encode_payload(value, job="hostile")
    assert decode_input(Loose, text, job="hostile") == value


@pytest.mark.parametrize(
    "key",
    ["a\x00b", "\ud800", "k" * (MAX_KEY_CHARS + 1)],
    ids=["nul", "lone-surrogate", "overlong"],
)
def test_a_key_no_backend_could_store_alike_is_refused(key: str) -> None:
    with pytest.raises(KeyUnderivableError):
        derive_str(lambda _: key, None, what="idempotency key", job="hostile")


def test_an_overlong_time_zone_is_refused_as_a_time_zone() -> None:
    with pytest.raises(TimeZoneInvalidError):
        validate_tz("Europe/" + "x" * 5000)
