"""The cost-growth plot of eval.bench_scale as a dependency-free SVG: stage seconds against
pages on log-log axes, measured points joined, each stage's fit extended to 100x (dashed)."""

from __future__ import annotations

import math
from html import escape
from pathlib import Path

WIDTH, HEIGHT, LEFT, RIGHT, TOP, BOTTOM = 900, 560, 70, 190, 20, 50
COLOURS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
           "#bcbd22", "#17becf", "#393b79", "#637939", "#8c6d31", "#843c39"]  # fmt: skip


def write_plot(result: dict, path: Path) -> None:
    samples, fits = result["samples"], result["fits"]
    full_pages = max(s["pages"] for s in samples)
    x_lo, x_hi = math.log10(min(s["pages"] for s in samples)), math.log10(full_pages * 100)
    series = {}
    for stage, f in fits.items():
        measured = [(s["pages"], s["stages"][stage]["seconds"]) for s in samples if s["stages"][stage]["seconds"] > 0]
        if measured:
            series[stage] = (measured, [(full_pages * k, f[f"seconds_at_{k}x"]) for k in (10, 100)])
    values = [y for m, e in series.values() for _, y in m + e if y > 0]
    y_lo, y_hi = math.floor(math.log10(min(values))), math.ceil(math.log10(max(values)))

    def px(pages: float, seconds: float) -> tuple[float, float]:
        x = LEFT + (math.log10(pages) - x_lo) / (x_hi - x_lo) * (WIDTH - LEFT - RIGHT)
        y = HEIGHT - BOTTOM - (math.log10(max(seconds, 10**y_lo)) - y_lo) / (y_hi - y_lo) * (HEIGHT - TOP - BOTTOM)
        return round(x, 1), round(y, 1)

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" font-family="sans-serif" '
        'font-size="11">',
        f'<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>',
    ]
    for decade in range(y_lo, y_hi + 1):
        _, y = px(10**x_lo, 10**decade)
        parts.append(f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y}" y2="{y}" stroke="#ddd"/>')
        parts.append(f'<text x="{LEFT - 6}" y="{y + 4}" text-anchor="end">{10**decade:g} s</text>')
    for k, label in ((1, "measured"), (10, "10x"), (100, "100x")):
        x, _ = px(full_pages * k, 10**y_lo)
        parts.append(f'<line x1="{x}" x2="{x}" y1="{TOP}" y2="{HEIGHT - BOTTOM}" stroke="#ddd"/>')
        parts.append(f'<text x="{x}" y="{HEIGHT - BOTTOM + 16}" text-anchor="middle">{full_pages * k:,} pages</text>')
        parts.append(f'<text x="{x}" y="{HEIGHT - BOTTOM + 30}" text-anchor="middle" fill="#666">{label}</text>')
    for i, (stage, (measured, extrapolated)) in enumerate(series.items()):
        colour = COLOURS[i % len(COLOURS)]
        points = " ".join(f"{x},{y}" for x, y in (px(*p) for p in measured))
        parts.append(f'<polyline points="{points}" fill="none" stroke="{colour}" stroke-width="2"/>')
        tail = " ".join(f"{x},{y}" for x, y in (px(*p) for p in [measured[-1], *extrapolated]))
        parts.append(f'<polyline points="{tail}" fill="none" stroke="{colour}" stroke-dasharray="5,4"/>')
        for x, y in (px(*p) for p in measured):
            parts.append(f'<circle cx="{x}" cy="{y}" r="3" fill="{colour}"/>')
        ly = TOP + 14 * i + 10
        b = fits[stage]["seconds_exponent"]
        parts.append(f'<rect x="{WIDTH - RIGHT + 12}" y="{ly - 8}" width="10" height="10" fill="{colour}"/>')
        parts.append(f'<text x="{WIDTH - RIGHT + 28}" y="{ly + 1}">{escape(stage)} (b={b})</text>')
    parts.append("</svg>")
    path.write_text("\n".join(parts) + "\n")
