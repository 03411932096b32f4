"""`DirectorySink` keeps objects whose names differ only by case apart on a case-insensitive
filesystem, and never writes outside its root (issue 40, item 12)."""

from __future__ import annotations

from pathlib import Path

import pytest

from xjobs.factories import DirectorySink
from xjobs.factories.backfill_errors import ExportSinkError


def _files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


@pytest.mark.asyncio
async def test_names_that_differ_only_by_case_are_distinct_files_ignoring_case(
    tmp_path: Path,
) -> None:
    sink = DirectorySink(tmp_path)
    names = ["Org-1/export/page-1.jsonl", "org-1/export/page-1.jsonl", "org-1/Export/Page-1.jsonl"]
    for name in names:
        await sink.put(name, name.encode())
    files = _files(tmp_path)
    # On a case-insensitive filesystem (macOS, Windows) two paths equal ignoring case are one file.
    assert len({path.casefold() for path in files}) == len(names)
    assert sorted(files.values()) == sorted(n.encode() for n in names)
    for name in names:
        assert sink.path_of(name).read_bytes() == name.encode()


def test_a_lower_case_name_is_its_own_path(tmp_path: Path) -> None:
    assert DirectorySink(tmp_path).path_of("org-1/x/page-000001.jsonl") == (
        tmp_path / "org-1" / "x" / "page-000001.jsonl"
    )


@pytest.mark.asyncio
@pytest.mark.parametrize("name", ["../up", "a/../../b", "/etc/passwd", "a\\..\\b", ".."])
async def test_a_name_cannot_climb_out_of_the_root(tmp_path: Path, name: str) -> None:
    root = tmp_path / "root"
    root.mkdir()
    with pytest.raises(ExportSinkError):
        await DirectorySink(root).put(name, b"x")
    assert _files(tmp_path) == {}


@pytest.mark.asyncio
async def test_a_symbolic_link_inside_the_root_does_not_lead_out(tmp_path: Path) -> None:
    root, outside = tmp_path / "root", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (root / "org-1").symlink_to(outside, target_is_directory=True)
    with pytest.raises(ExportSinkError) as caught:
        await DirectorySink(root).put("org-1/x/page-1.jsonl", b"secret rows")
    assert caught.value.code == "XJOBS_EXPORT_SINK"
    assert list(outside.rglob("*")) == []
