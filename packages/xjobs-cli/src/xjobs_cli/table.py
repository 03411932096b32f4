"""Plain-text tables for the terminal: columns padded to the widest cell, numbers right-aligned."""

from __future__ import annotations

from collections.abc import Collection, Sequence


def render(
    headers: Sequence[str],
    rows: Sequence[Sequence[object]],
    *,
    indent: str = "",
    right: Collection[int] = (),
) -> str:
    """The table as lines of text; a column of ints, or one whose index is in `right`, is right-aligned."""
    cells = [[str(c) for c in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in cells:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(cell))
    numeric = [
        i in right or (all(isinstance(row[i], int) for row in rows if i < len(row)) and bool(rows))
        for i in range(len(headers))
    ]

    def line(values: Sequence[str]) -> str:
        padded = [
            v.rjust(widths[i]) if numeric[i] else v.ljust(widths[i]) for i, v in enumerate(values)
        ]
        return (indent + "  ".join(padded)).rstrip()

    out = [line([h.upper() for h in headers])]
    out.extend(line(row) for row in cells)
    return "\n".join(out)
