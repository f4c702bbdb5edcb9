"""The leaderboard page's confusion matrices: per classification task, each model's as an inline SVG heat
map (results.json's `confusion_matrix`: rows the true class, columns the predicted class, in `classes`
order). A matrix's cells show their counts, each shaded by its share of its row (the true class's test
records): the diagonal (right) in green, the rest (wrong) in red, so that a good classifier reads as a
dark green diagonal; a class with no test records is a grey row."""
from __future__ import annotations

from typing import Any, Mapping, NamedTuple, Optional, Sequence

from codeeval.reporting.charts import esc

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
