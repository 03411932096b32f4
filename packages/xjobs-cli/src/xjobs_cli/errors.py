"""The command line's own refusals, each with a stable code (the core's `XJobsError` base)."""

from __future__ import annotations

from xjobs import XJobsError


class UsageError(XJobsError):
    """The command line is malformed: a missing operand, an unknown flag, a value of the wrong kind.

    To do: Read `xjobs COMMAND --help`.
    """

    code = "XJOBS_USAGE"


class TargetInvalidError(XJobsError):
    """The command names no app and no URL, both, or a URL where it needs the app's declarations.

    To do: Name the app (`MODULE:APP`) or a URL (`--url`, `$XJOBS_URL`), not both.
    """

    code = "XJOBS_TARGET_INVALID"


class UnexpectedError(XJobsError):
    """An error xjobs did not anticipate (a bug, or an engine error no driver translated).

    To do: Report it with the traceback (`--log-level DEBUG`).
    """

    code = "XJOBS_UNEXPECTED"
