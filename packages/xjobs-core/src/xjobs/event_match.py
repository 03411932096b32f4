"""Events as every bus takes them: the name, tenant and JSON-object checks, and the `match` rule
(top-level keys, equal JSON values, numbers by their exact decimal value)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from decimal import Decimal
from typing import Any, Final

from xjobs.actor import current_actor
from xjobs.errors import EventInvalidError, JobTenantMismatchError, XJobsError
from xjobs.names import validate_job_name
from xjobs.payload import DEFAULT_MAX_PAYLOAD_BYTES, check_json_values


def validate_event_name(name: object) -> str:
    """An event name follows the job-name rule (`order.paid`, `user-signed-up`)."""
    try:
        return validate_job_name(name, what="event")
    except XJobsError as exc:
        raise EventInvalidError(exc.message) from exc


MAX_TENANT_CHARS: Final = 200


def validate_event_tenant(tenant: object) -> str | None:
    """An event's tenant: `None` (the untenanted scope) or an org id, 1-200 characters without NUL."""
    if tenant is None:
        return None
    if not isinstance(tenant, str) or not tenant or len(tenant) > MAX_TENANT_CHARS:
        raise EventInvalidError(
            f"an event's tenant must be None or an org id of 1-{MAX_TENANT_CHARS} characters, "
            f"got {tenant!r}"
        )
    if "\x00" in tenant:
        raise EventInvalidError("an event's tenant must not contain NUL")
    return tenant


class AmbientTenant:
    """The default tenant of `App.send_event`: the ambient actor's org (inside a run, `ctx.tenant`)."""

    def __repr__(self) -> str:
        return "AMBIENT"


AMBIENT: Final = AmbientTenant()


def sending_tenant(tenant: str | AmbientTenant | None) -> str | None:
    """The tenant an event is sent in: the ambient actor's org by default (`None`, the untenanted
    scope, with no actor or an actor of no org); an explicit one only from a process whose actor has
    no org, or the same org (`XJOBS_JOB_TENANT_MISMATCH` otherwise, before anything is written)."""
    actor = current_actor()
    org = None if actor is None else actor.org_id
    if isinstance(tenant, AmbientTenant):
        return org
    scope = validate_event_tenant(tenant)
    if org is not None and scope != org:
        raise JobTenantMismatchError(
            f"an actor of org {org!r} cannot send an event in tenant {scope!r}: leave tenant= out "
            "(its own org), or send from a context with no actor org (an admin process)"
        )
    return scope


def encode_object(value: object, *, what: str, max_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES) -> str:
    """The JSON text of an event payload or a match: an object with string keys, no NUL, bounded."""
    if not isinstance(value, Mapping):
        raise EventInvalidError(
            f"{what} must be a JSON object (a mapping), got {type(value).__name__}"
        )
    if not all(isinstance(key, str) for key in value):
        raise EventInvalidError(f"{what} must have string keys only")
    try:
        text = json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError, RecursionError) as exc:
        raise EventInvalidError(f"{what} is not JSON: {exc}") from exc
    check_json_values(value, what=what)
    size = len(text.encode("utf-8"))
    if size > max_bytes:
        raise EventInvalidError(f"{what} is {size} bytes, over the limit of {max_bytes}")
    return text


def decode_object(text: str) -> Any:
    """JSON text as the match reads it: a number with a fraction or an exponent as a `Decimal`, so
    every number keeps its exact decimal value (as Postgres' `numeric` and the Redis scripts do)."""
    return json.loads(text, parse_float=Decimal)


def json_equal(left: Any, right: Any) -> bool:
    """Deep JSON equality: numbers compare by exact value (an integer beyond 2^53 is never rounded),
    a boolean is never a number, key order is moot."""
    if isinstance(left, bool) or isinstance(right, bool):
        return isinstance(left, bool) and isinstance(right, bool) and left == right
    if isinstance(left, int | float | Decimal) and isinstance(right, int | float | Decimal):
        return left == right
    if isinstance(left, dict) and isinstance(right, dict):
        return left.keys() == right.keys() and all(json_equal(left[k], right[k]) for k in left)
    if isinstance(left, list) and isinstance(right, list):
        return len(left) == len(right) and all(
            json_equal(a, b) for a, b in zip(left, right, strict=True)
        )
    return type(left) is type(right) and left == right


def matches(payload: Mapping[str, Any], match: Mapping[str, Any]) -> bool:
    """Whether every key of `match` is in `payload` with an equal JSON value."""
    return all(key in payload and json_equal(payload[key], value) for key, value in match.items())
