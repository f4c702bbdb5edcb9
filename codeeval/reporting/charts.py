"""The leaderboard page's charts as inline SVG (no script, no network): tonight's primary metric per
model as bars with their 95% intervals as error bars, and per task its trend over the nights kept
in history/ as one line per model (the confusion matrices: codeeval/reporting/matrix.py)."""
from __future__ import annotations

import html
from typing import Optional

BAR_W, BAR_GAP, CHART_H, LABEL_W, TOP = 28, 14, 160, 40, 18
TREND_W, TREND_H, PAD_L, PAD_B = 420, 170, 40, 34
COLOURS = ("#4a7ebb", "#d9822b", "#3d9970", "#b10dc9", "#e0474c", "#7f8c8d", "#2c3e50", "#c9a227")


def esc(value) -> str:
    return html.escape(str(value), quote=True)


def colour(i: int) -> str:
    return COLOURS[i % len(COLOURS)]


def bars(task: str, metric: str, values: list[tuple[str, float, Optional[tuple[float, float]]]]) -> str:
    """One bar per model, scaled to [0, max(1, top value)], with its 95% interval as an error bar
    (none when the value has no interval: fewer than two problems)."""
    top = max([1.0, *(v for _, v, _ in values), *(ci[1] for _, _, ci in values if ci)])
    width = LABEL_W + len(values) * (BAR_W + BAR_GAP) + BAR_GAP
    out = []
    for i, (model, value, ci) in enumerate(values):
        h = CHART_H * value / top
        x = LABEL_W + BAR_GAP + i * (BAR_W + BAR_GAP)
        label_y = CHART_H - h + TOP - 4
        interval = f", 95% interval [{ci[0]:.4f}, {ci[1]:.4f}]" if ci else ""
        out.append(f'<rect class="bar" data-model="{esc(model)}" data-value="{value:.6g}" x="{x}" '
                   f'y="{CHART_H - h + TOP:.1f}" width="{BAR_W}" height="{h:.1f}"><title>{esc(model)}: '
                   f'{value:.4f}{interval}</title></rect>')
        if ci:
            y_lo, y_hi = CHART_H * (1 - ci[0] / top) + TOP, CHART_H * (1 - ci[1] / top) + TOP
            mid, cap = x + BAR_W / 2, BAR_W / 4
            out.append(f'<g class="errorbar" data-model="{esc(model)}" data-ci="{ci[0]:.6g},{ci[1]:.6g}">'
                       f'<line x1="{mid}" y1="{y_lo:.1f}" x2="{mid}" y2="{y_hi:.1f}"/>'
                       + "".join(f'<line x1="{mid - cap}" y1="{y:.1f}" x2="{mid + cap}" y2="{y:.1f}"/>'
                                 for y in (y_lo, y_hi)) + '</g>')
            label_y = min(label_y, y_hi - 4)
        out.append(f'<text x="{x + BAR_W / 2}" y="{label_y:.1f}" text-anchor="middle">{value:.3f}</text>'
                   f'<text x="{x + BAR_W / 2}" y="{CHART_H + TOP + 14}" text-anchor="middle">{i + 1}</text>')
    legend = "".join(f"<li>{esc(m)}</li>" for m, _, _ in values)  # numbered as the bars
    return (f'<div class="chart" data-task="{esc(task)}"><h3>{esc(task)} ({esc(metric)}) tonight, '
            f'with 95% intervals</h3>'
            f'<svg width="{width}" height="{CHART_H + TOP + 24}" role="img" aria-label="{esc(task)} {esc(metric)}">'
            f'<line class="axis" x1="{LABEL_W}" y1="{CHART_H + TOP}" x2="{width}" y2="{CHART_H + TOP}"/>'
            f'<text x="{LABEL_W - 4}" y="{TOP + 4}" text-anchor="end">{top:g}</text>'
            f'<text x="{LABEL_W - 4}" y="{CHART_H + TOP}" text-anchor="end">0</text>'
            f'{"".join(out)}</svg><ol>{legend}</ol></div>')


def trend(task: str, metric: str, nights: list[str], series: dict[str, list]) -> str:
    """One line per model over the nights (oldest left); a night a model has no value for (it
    failed, or was not run) leaves a gap. series: model -> a value or None per night."""
    values = [v for line in series.values() for v in line if v is not None]
    top = max([1.0, *values])
    step = (TREND_W - PAD_L - 20) / max(1, len(nights) - 1)

    def xy(i: int, v: float) -> tuple[float, float]:
        x = PAD_L + 10 + (i * step if len(nights) > 1 else (TREND_W - PAD_L - 20) / 2)
        return x, TOP + TREND_H * (1 - v / top)

    lines, legend = [], []
    for k, (model, line) in enumerate(series.items()):
        segments, current = [], []
        for i, v in enumerate(line):
            if v is None:
                segments += [current] if current else []
                current = []
            else:
                current.append(xy(i, v))
        segments += [current] if current else []
        data = ",".join("" if v is None else f"{v:.6g}" for v in line)
        paths = "".join(f'<polyline fill="none" stroke="{colour(k)}" stroke-width="2" points="'
                        + " ".join(f"{x:.1f},{y:.1f}" for x, y in seg) + '"/>' for seg in segments)
        dots = "".join(f'<circle cx="{xy(i, v)[0]:.1f}" cy="{xy(i, v)[1]:.1f}" r="3" fill="{colour(k)}">'
                       f'<title>{esc(model)}, {esc(nights[i])}: {v:.4f}</title></circle>'
                       for i, v in enumerate(line) if v is not None)
        lines.append(f'<g class="series" data-model="{esc(model)}" data-values="{data}">{paths}{dots}</g>')
        none = "" if any(v is not None for v in line) else " (no value yet)"
        legend.append(f'<li><span class="swatch" style="background:{colour(k)}"></span>{esc(model)}{none}</li>')
    base = TOP + TREND_H
    ticks = (f'<text x="{PAD_L + 6}" y="{base + 16}">{esc(short_night(nights[0]))}</text>'
             + (f'<text x="{TREND_W - 10}" y="{base + 16}" text-anchor="end">{esc(short_night(nights[-1]))}</text>'
                if len(nights) > 1 else ""))
    return (f'<div class="chart trend" data-task="{esc(task)}" data-nights="{len(nights)}">'
            f'<h3>{esc(task)} ({esc(metric)}) over {len(nights)} night{"s" * (len(nights) != 1)}</h3>'
            f'<svg width="{TREND_W}" height="{base + PAD_B}" role="img" aria-label="{esc(task)} trend">'
            f'<line class="axis" x1="{PAD_L}" y1="{base}" x2="{TREND_W}" y2="{base}"/>'
            f'<line class="axis" x1="{PAD_L}" y1="{TOP}" x2="{PAD_L}" y2="{base}"/>'
            f'<text x="{PAD_L - 4}" y="{TOP + 4}" text-anchor="end">{top:g}</text>'
            f'<text x="{PAD_L - 4}" y="{base}" text-anchor="end">0</text>{ticks}{"".join(lines)}</svg>'
            f'<ul class="legend">{"".join(legend)}</ul></div>')


def short_night(night: str) -> str:
    """2026-11-24T195012Z -> 2026-11-24 19:50 (a plain date stays as it is)."""
    day, _, time = night.partition("T")
    return f"{day} {time[:2]}:{time[2:4]}" if len(time) >= 4 else day
