"""Where the dashboard is mounted: `MOUNT_PATH` (`/_x`), the documented default for a service, and
`mount_path(path)`, a path checked once (served alone, `xjobs web --path`, it defaults to `/`)."""

from __future__ import annotations

import re
from typing import Final

from xjobs_web.errors import DashboardOptionInvalidError

MOUNT_PATH: Final = "/_x"
"""The path a service mounts the dashboard at unless it has a reason to pick another: short, and
out of the way of the service's own routes."""
_SEGMENT = re.compile(r"[A-Za-z0-9._~-]+")


def mount_path(path: str = MOUNT_PATH) -> str:
    """`path` as a mount: `/` or `/segment[/segment…]` of unreserved URL characters, no trailing
    slash; anything else is `XJOBS_DASHBOARD_OPTION_INVALID`."""
    if path == "/":
        return path
    segments = path.split("/")
    if (
        not path.startswith("/")
        or path.endswith("/")
        or not all(_SEGMENT.fullmatch(s) and s not in (".", "..") for s in segments[1:])
    ):
        raise DashboardOptionInvalidError(
            f"a mount path is / or /name[/name…] of letters, digits and ._~- (e.g. "
            f"{MOUNT_PATH}); got {path[:80]!r}"
        )
    return path
