"""The overview's throughput chart: one bar a minute, completed over failed, as an inline SVG."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

from xjobs.operate.timefmt import iso

WIDTH = 1200
HEIGHT = 150
PAD_BOTTOM = 18


@dataclass(frozen=True, slots=True)
class MinuteBar:
    """The attempts that ended within one minute: completed, and failed (retried, dead-lettered, …)."""

    start_ms: int
    completed: int
    failed: int


def throughput_svg(bars: Sequence[MinuteBar]) -> str:
    """An SVG of stacked bars (completed below, failed above), scaled to the busiest minute."""
    if not bars:
        return ""
    peak = max(max(b.completed + b.failed for b in bars), 1)
    slot = WIDTH / len(bars)
    scale = (HEIGHT - PAD_BOTTOM - 4) / peak
    parts = [
        f'<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
        f'aria-label="attempts ended per minute, last {len(bars)} minutes (peak {peak})">'
    ]
    base = HEIGHT - PAD_BOTTOM
    for i, bar in enumerate(bars):
        x = i * slot + 1
        w = max(slot - 2, 1)
        done_h = bar.completed * scale
        fail_h = bar.failed * scale
        title = escape(f"{iso(bar.start_ms)}: {bar.completed} completed, {bar.failed} failed")
        parts.append(f"<g><title>{title}</title>")
        if done_h:
            parts.append(
                f'<rect class="ok" x="{x:.1f}" y="{base - done_h:.1f}" width="{w:.1f}" height="{done_h:.1f}"/>'
            )
        if fail_h:
            parts.append(
                f'<rect class="bad" x="{x:.1f}" y="{base - done_h - fail_h:.1f}" '
                f'width="{w:.1f}" height="{fail_h:.1f}"/>'
            )
        parts.append("</g>")
    parts.append(f'<line class="axis" x1="0" y1="{base}" x2="{WIDTH}" y2="{base}"/>')
    parts.append(f'<text x="0" y="{HEIGHT - 4}">-{len(bars)}m</text>')
    parts.append(f'<text x="{WIDTH}" y="{HEIGHT - 4}" text-anchor="end">now</text>')
    parts.append(f'<text x="0" y="12">peak {peak}/min</text>')
    parts.append("</svg>")
    return "".join(parts)
