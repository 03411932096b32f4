"""A job's family for `xjobs jobs show`: its parent (when it is a child) and its children counted by state."""

from __future__ import annotations

from xjobs import App
from xjobs_cli.output import Body


async def family_of(app: App, job_id: str) -> Body | None:
    """The job's parent id and its children counted by state, or `None` when the backend keeps
    no child jobs (it does not declare `children`) or does not know the job."""
    store = app.backend.children
    if store is None:
        return None
    family = await store.family(job_id)
    if family is None:
        return None
    return {"parent_id": family.parent_id, "children": dict(sorted(family.children.items()))}


def family_lines(family: Body | None) -> list[str]:
    """The text lines of a family: `parent ID` and `children (N): n state, …`, each only when
    there is one (a job outside any workflow shows nothing)."""
    if family is None:
        return []
    lines: list[str] = []
    if family["parent_id"] is not None:
        lines.append(f"parent: {family['parent_id']}")
    children: dict[str, int] = family["children"]
    if children:
        counts = ", ".join(f"{count} {state}" for state, count in children.items())
        lines.append(f"children ({sum(children.values())}): {counts}")
    return lines
