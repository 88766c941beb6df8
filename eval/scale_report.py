"""eval.bench_scale's fits, table and plot: growth exponents per stage, the 10x/100x
extrapolation, the Markdown table in docs/results.md, and a dependency-free SVG of stage seconds
against pages on log-log axes (measured points joined, each fit extended to 100x, dashed)."""

from __future__ import annotations

import math
from html import escape
from pathlib import Path


def growth_exponent(xs: list[float], ys: list[float]) -> float | None:
    """Least-squares slope of log y on log x (None when fewer than two positive points)."""
    points = [(math.log(x), math.log(y)) for x, y in zip(xs, ys) if x > 0 and y and y > 0]
    if len(points) < 2:
        return None
    mx = sum(p[0] for p in points) / len(points)
    my = sum(p[1] for p in points) / len(points)
    var = sum((p[0] - mx) ** 2 for p in points)
    return round(sum((p[0] - mx) * (p[1] - my) for p in points) / var, 2) if var else None


def linear_fit(xs: list[float], ys: list[float]) -> tuple[float, float]:
    """(intercept, slope) of the least-squares line through the points."""
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    var = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / var if var else 0.0
    return my - slope * mx, slope


def fit(samples: list[dict]) -> dict:
    """Per stage: the exponent b of seconds ~ pages^b, extrapolated to 10x/100x the largest sample
    (b below 0, noise on a flat stage, extrapolates as 0); for peak RSS, the exponent of the part
    above the import baseline and a line (fixed + per page: a model, the tensors and the runtime
    do not grow with the corpus, so a power law of the whole would hide a per-page term)."""
    pages = [s["pages"] for s in samples]
    largest = samples[-1]  # samples are in growing order
    fits = {}
    for stage in largest["stages"]:
        seconds = [s["stages"][stage]["seconds"] for s in samples]
        rss = [max(s["stages"][stage]["peak_rss_mib"] - s["baseline_rss_mib"], 1) for s in samples]
        b_time, b_rss = growth_exponent(pages, seconds), growth_exponent(pages, rss)
        intercept, slope = linear_fit(pages, [s["stages"][stage]["peak_rss_mib"] for s in samples])
        top = largest["stages"][stage]
        fits[stage] = {
            "seconds_exponent": b_time,
            "rss_exponent": b_rss,
            **{f"seconds_at_{k}x": round(top["seconds"] * k ** max(b_time or 0.0, 0.0), 1) for k in (10, 100)},
            "rss_mib_per_1000_pages": round(slope * 1000, 1),
            **{f"peak_rss_mib_at_{k}x": round(intercept + max(slope, 0.0) * largest["pages"] * k) for k in (10, 100)},
        }
    return fits


def table(result: dict) -> str:
    samples, fits = result["samples"], result["fits"]
    head = " | ".join(f"s @ {s['pages']} p" for s in samples)
    lines = [
        f"| stage | {head} | b (time) | s @ 10x | s @ 100x | peak RSS MiB (100 %) | MiB / 1k pages | RSS @ 100x |",
        "|---|" + "---|" * (len(samples) + 6),
    ]
    for stage, f in fits.items():
        secs = " | ".join(str(s["stages"][stage]["seconds"]) for s in samples)
        rss = samples[-1]["stages"][stage]["peak_rss_mib"]
        lines.append(
            f"| {stage} | {secs} | {f['seconds_exponent']} | {f['seconds_at_10x']} | {f['seconds_at_100x']} "
            f"| {rss} | {f['rss_mib_per_1000_pages']} | {f['peak_rss_mib_at_100x']} |"
        )
    return "\n".join(lines)


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
