"""A sweep as declared: its name, version and checksum, scope, environments, `requires`, batch and pacing."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from xjobs.factories.backfill_errors import BackfillInvalidError
from xjobs.factories.backfill_scope import Scope
from xjobs.names import validate_job_name

ENVIRONMENT_NAME: Final = re.compile(r"[a-z0-9][a-z0-9_-]{0,39}")
VERSION_NAME: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,39}")


def validate_environment(name: object) -> str:
    """An environment name: 1-40 characters of `[a-z0-9_-]`, or `BackfillInvalidError`."""
    if not isinstance(name, str) or not ENVIRONMENT_NAME.fullmatch(name):
        raise BackfillInvalidError(f"environment {name!r} must be 1-40 characters of [a-z0-9_-]")
    return name


def checksum_of(name: str, version: str, scope: Scope) -> str:
    """The declaration's checksum: a new version (or scope) is a new sweep, which runs again."""
    text = json.dumps({"name": name, "version": version, "scope": scope}, sort_keys=True)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


@dataclass(frozen=True, slots=True)
class BackfillSpec:
    """One declared sweep. `environments` is `None` when it runs everywhere."""

    name: str
    version: str
    checksum: str
    scope: Scope
    environments: tuple[str, ...] | None
    requires: tuple[str, ...]
    batch: int
    interval_s: float

    def runs_in(self, environment: str) -> bool:
        """Whether the sweep is declared for `environment`."""
        return self.environments is None or environment in self.environments


def spec_parts(
    name: str, version: object, environments: Sequence[str] | None, requires: Sequence[str]
) -> tuple[str, tuple[str, ...] | None, tuple[str, ...]]:
    """The validated version, environments and requires of a declaration named `name`."""
    if not isinstance(version, str) or not VERSION_NAME.fullmatch(version):
        raise BackfillInvalidError(f"backfill version {version!r} must be 1-40 of [A-Za-z0-9_.-]")
    envs: tuple[str, ...] | None = None
    if environments is not None:
        if isinstance(environments, str):
            raise BackfillInvalidError("backfill environments is a list of names, not one string")
        envs = tuple(sorted({validate_environment(e) for e in environments}))
        if not envs:
            raise BackfillInvalidError("backfill environments is empty: the sweep could never run")
    if isinstance(requires, str):
        raise BackfillInvalidError("backfill requires is a list of sweep names, not one string")
    needs = tuple(sorted({validate_job_name(r, what="required backfill") for r in requires}))
    if name in needs:
        raise BackfillInvalidError(f"backfill {name!r} requires itself")
    return version, envs, needs
