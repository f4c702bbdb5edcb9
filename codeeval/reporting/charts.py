"""The leaderboard page's charts as inline SVG (no script, no network): tonight's primary metric per
model as bars with their 95% intervals as error bars, per task its trend over the nights kept in
history/ as one line per model, and per classification task each model's confusion matrix as a heat
map (results.json's `confusion_matrix`: rows the true class, columns the predicted class, in `classes`
order). A matrix's cells show their counts, each shaded by its share of its row (the true class's test
records): the diagonal (right) in green, the rest (wrong) in red, so that a good classifier reads as a
dark green diagonal; a class with no test records is a grey row."""
from __future__ import annotations

import html
from typing import Any, Mapping, NamedTuple, Optional, Sequence

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


# the confusion matrices: px of a cell's side, a label character, an axis title, the n column
CELL, CHAR_W, AXIS, TOTAL_W = 34, 6.5, 14, 34
RIGHT, WRONG, EMPTY = (26, 127, 55), (187, 0, 0), "#f2f2f2"  # the diagonal, off the diagonal, a row with no records
LIGHT = 0.55  # a cell this dark or darker gets white text
MATRIX_STYLE = """
.matrices { gap: 1.2em 2em; margin-bottom: 1em; } .matrix h3 { overflow-wrap: anywhere; max-width: 22em; }
.matrix .accuracy { margin: 0 0 .2em 0; color: #555; font-size: .9em; }
.matrix .cell { stroke: #fff; } .matrix .diagonal { stroke: #1a7f37; } .matrix .total { fill: #777; }
.matrix .axis-title { fill: #555; font-style: italic; }
"""  # the page's style for confusion_section, added to its head where it draws one


class Confusion(NamedTuple):
    """A task's confusion matrix as results.json has it, and its accuracy (None: not reported)."""

    classes: tuple[str, ...]
    counts: tuple[tuple[int, ...], ...]
    accuracy: Optional[float]


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def confusion_of(metrics: Any) -> Optional[Confusion]:
    """A task's matrix from its metrics in results.json; None where it has none (every family but
    classification) or where it is not a square of counts, one row and column per class."""
    if not isinstance(metrics, Mapping):
        return None
    classes, counts = metrics.get("classes"), metrics.get("confusion_matrix")
    if not isinstance(classes, list) or not classes or not all(isinstance(c, str) for c in classes):
        return None
    if not isinstance(counts, list) or len(counts) != len(classes) or not all(
            isinstance(row, list) and len(row) == len(classes) and all(map(_count, row)) for row in counts):
        return None
    accuracy = metrics.get("accuracy")
    accuracy = float(accuracy) if isinstance(accuracy, (int, float)) and not isinstance(accuracy, bool) else None
    return Confusion(tuple(classes), tuple(tuple(row) for row in counts), accuracy)


def confusions_of(metrics: Mapping[str, Any]) -> dict[str, Confusion]:
    """task -> its confusion matrix, for the tasks of a run's metrics (RunResults.metrics) that have one."""
    found = {task: confusion_of(values) for task, values in metrics.items()}
    return {task: matrix for task, matrix in found.items() if matrix is not None}


def _shade(share: float, right: bool) -> str:
    """White at 0, the full colour at 1."""
    r, g, b = (round(255 + (c - 255) * share) for c in (RIGHT if right else WRONG))
    return f"#{r:02x}{g:02x}{b:02x}"


def _cell(x: int, y: int, true: str, predicted: str, count: int, total: int, right: bool) -> str:
    share = count / total if total else 0.0
    fill = _shade(share, right) if total else EMPTY
    ink = "#fff" if share >= LIGHT else "#222"
    tip = (f"true {true}, predicted {predicted}: {count} of {total} ({share:.0%})" if total
           else f"true {true}: no test records")
    return (f'<rect class="cell{" right" if right else ""}" data-true="{esc(true)}" data-predicted="{esc(predicted)}" '
            f'data-count="{count}" data-share="{share:.4g}" x="{x}" y="{y}" width="{CELL}" height="{CELL}" '
            f'fill="{fill}"><title>{esc(tip)}</title></rect>'
            f'<text class="count" x="{x + CELL // 2}" y="{y + CELL // 2 + 4}" text-anchor="middle" '
            f'fill="{ink}">{count}</text>')


def _labels(classes: Sequence[str], left: int, top: int, rotate: bool) -> str:
    """The class names: predicted across the top (slanted when one is wider than a cell), true down the side."""
    out = []
    for i, name in enumerate(classes):
        x, y = left + i * CELL + CELL // 2, top - 5
        turn = f' transform="rotate(-45 {x} {y})"' if rotate else ""
        out.append(f'<text class="predicted" x="{x}" y="{y}" text-anchor="{"start" if rotate else "middle"}"'
                   f'{turn}>{esc(name)}</text>'
                   f'<text class="true" x="{left - 5}" y="{top + i * CELL + CELL // 2 + 4}" '
                   f'text-anchor="end">{esc(name)}</text>')
    return "".join(out)


def heatmap(task: str, model: str, matrix: Confusion) -> str:
    """One model's matrix on one task: a titled SVG with the class names on both axes (true down
    the side, predicted across the top), each row's record count at its right and the accuracy."""
    n, widest = len(matrix.classes), round(max(len(c) for c in matrix.classes) * CHAR_W)
    rotate = widest > CELL + 2  # an estimate: "false" fits a cell
    slant = round(widest * 0.71) if rotate else 0  # how far a slanted name reaches up and right
    left, top, grid = AXIS + widest + 8, AXIS + (slant + 10 if rotate else 16), n * CELL
    width = max(left + grid + TOTAL_W, left + grid - CELL // 2 + slant + 6)
    totals = [sum(row) for row in matrix.counts]
    cells = "".join(_cell(left + j * CELL, top + i * CELL, true, predicted, matrix.counts[i][j], totals[i], i == j)
                    for i, true in enumerate(matrix.classes) for j, predicted in enumerate(matrix.classes))
    diagonal = "".join(f'<rect class="diagonal" x="{left + i * CELL}" y="{top + i * CELL}" width="{CELL}" '
                       f'height="{CELL}" fill="none"/>' for i in range(n))  # over the cells' white borders
    sums = "".join(f'<text class="total" x="{left + grid + 6}" y="{top + i * CELL + CELL // 2 + 4}">{t}</text>'
                   for i, t in enumerate(totals))
    right, records = sum(matrix.counts[i][i] for i in range(n)), sum(totals)
    accuracy = matrix.accuracy if matrix.accuracy is not None else (right / records if records else None)
    score = "accuracy -" if accuracy is None else f"accuracy {accuracy:.4f}"
    return (f'<div class="chart matrix" data-task="{esc(task)}" data-model="{esc(model)}">'
            f'<h3>{esc(task)}: {esc(model)}</h3><p class="accuracy">{score} ({right} of {records} right)</p>'
            f'<svg width="{width}" height="{top + grid + 6}" role="img" '
            f'aria-label="{esc(f"{task}: {model} confusion matrix")}">'
            f'<text class="axis-title" x="{left + grid // 2}" y="{AXIS - 3}" text-anchor="middle">predicted</text>'
            f'<text class="axis-title" x="{AXIS - 3}" y="{top + grid // 2}" text-anchor="middle" '
            f'transform="rotate(-90 {AXIS - 3} {top + grid // 2})">true</text>'
            f'<text class="total" x="{left + grid + 6}" y="{top - 5}">n</text>'
            f'{_labels(matrix.classes, left, top, rotate)}{cells}{diagonal}{sums}</svg></div>')


def confusion_section(tasks: Sequence[str], matrices: Mapping[str, Mapping[str, Confusion]]) -> str:
    """Per task (in `tasks` order, then any other), tonight's matrix of each model that has one;
    nothing where no model has one. matrices: model -> task -> its matrix."""
    order = list(dict.fromkeys([*tasks, *(t for per_task in matrices.values() for t in per_task)]))
    rows = []
    for task in order:
        charts = "".join(heatmap(task, model, per_task[task]) for model, per_task in matrices.items()
                         if task in per_task)
        if charts:
            rows.append(f'<div class="charts matrices" data-task="{esc(task)}">{charts}</div>')
    if not rows:
        return ""
    return ('<h2 id="confusion">Confusion matrices</h2><p>Tonight per classification task and model: rows the '
            'true class, columns the predicted class; each cell its count of test records, shaded by its share '
            'of its row (green on the diagonal: right; red off it: wrong; a grey row: no records of that '
            f'class).</p>{"".join(rows)}')
