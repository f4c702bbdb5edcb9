"""The leaderboard as one static HTML file a team reads in the morning: tonight's failures with
their cause, a sortable table (click a header) of each task's primary metric with its 95% interval
and the number of problems it covers, the changes since the previous night (metrics, and the
problems that flipped), per task a trend over the nights in history/ and tonight's bars with error
bars, per classification task each model's confusion matrix as a heat map
(codeeval/reporting/matrix.py), and per model its paired comparisons
(codeeval/reporting/paired_page.py).
Self-contained (inline CSS, JS and SVG, codeeval/reporting/charts.py): it opens from a
file, on a machine with no network, and can be served by any static web server. Each score links to
its task in the run's view of that night, a model's name to its run's view, a flipped problem to its
sample's page (views/, reporting/view/nights.py) and its Parquet rows (samples/): relative links, both
folders sit beside index.html."""
from __future__ import annotations

from collections import defaultdict
from typing import Mapping, Optional, Sequence

from codeeval.core.results import LeaderboardRow
from codeeval.reporting.charts import bars, trend
from codeeval.reporting.charts import esc as _esc
from codeeval.reporting.matrix import MATRIX_STYLE, Confusion, confusion_section
from codeeval.reporting.paired import Paired
from codeeval.reporting.paired_page import flips_table, sections
from codeeval.reporting.view import links

SCRIPT = """
function sortBy(table, col, asc) {
  const ths = table.tHead.rows[0].cells;
  Array.from(ths).forEach(h => delete h.dataset.order);
  ths[col].dataset.order = asc ? 'asc' : 'desc';
  const key = r => { const c = r.cells[col]; return c.dataset.value !== undefined ? parseFloat(c.dataset.value) : c.textContent; };
  const body = table.tBodies[0];
  Array.from(body.rows).sort((a, b) => {
    const x = key(a), y = key(b);
    const d = (typeof x === 'number' && typeof y === 'number') ? x - y : String(x).localeCompare(String(y));
    return asc ? d : -d;
  }).forEach(r => body.appendChild(r));
}
document.querySelectorAll('table.sortable').forEach(table => {
  Array.from(table.tHead.rows[0].cells).forEach((th, col) =>
    th.addEventListener('click', () => sortBy(table, col, th.dataset.order !== 'asc')));
  const m = location.hash.match(/^#sort=(\\d+)-(asc|desc)$/);  // a link to a sorted view
  if (m) sortBy(table, parseInt(m[1]), m[2] === 'asc');
});
"""

STYLE = """
body { font-family: sans-serif; margin: 2em; color: #222; }
table { border-collapse: collapse; margin-bottom: 2em; }
th, td { border: 1px solid #ccc; padding: 4px 10px; text-align: right; }
th { background: #eee; cursor: pointer; user-select: none; }
th[data-order=asc]::after { content: ' \\25B2'; } th[data-order=desc]::after { content: ' \\25BC'; }
td:first-child, th:first-child { text-align: left; }
.charts { display: flex; flex-wrap: wrap; gap: 2em; }
.chart h3 { font-size: 1em; margin: 0 0 .3em 0; }
.bar { fill: #4a7ebb; } .axis { stroke: #888; } text { font-size: 11px; }
td .problems, td .ci { color: #777; font-size: .85em; margin-left: .4em; }
.errorbar line { stroke: #222; stroke-width: 1.5; }
ul.flips { margin: .1em 0; padding: 0; list-style: none; font-size: .9em; } .where { color: #555; }
#flips td, .paired-table td { vertical-align: top; } #flips td:nth-child(n+3) { text-align: left; }
td.against { white-space: nowrap; text-align: left; } #flips th, .paired-table th { text-align: left; }
tr.flipped td { text-align: left; border-top: none; } tr.flipped ul.flips { display: inline; }
tr.flipped ul.flips li { display: inline; margin-right: 1.2em; }
section.paired h3 { margin-bottom: .3em; } tr.not-compared td { color: #777; text-align: left; }
tr.failed td:first-child { color: #b00; } td.stale { color: #999; } td.failed-cell { color: #b00; }
.failures { border: 2px solid #d33; background: #fff4f4; padding: .5em 1em; margin-bottom: 1.5em; }
.failures h2 { color: #b00; margin-top: .2em; } .cause { white-space: pre-wrap; margin: .2em 0 .8em 1em; }
td.up { color: #1a7f37; } td.down { color: #b00; }
.legend { list-style: none; padding: 0; }
.swatch { display: inline-block; width: 1em; height: .6em; margin-right: .4em; }
"""
# added to STYLE only where a row names a view (a leaderboard from before views: the page it was)
VIEW_STYLE = """
a.view { color: inherit; text-decoration: underline dotted #999; } a.view:hover { text-decoration: underline; }
"""


def _interval(r: LeaderboardRow) -> tuple[str, str]:
    """The cell's 95% interval (shown) and its standard error (in the tooltip), when computed."""
    if r.ci95_low is None or r.ci95_high is None:
        return "", ""
    return (f'<span class="ci">[{r.ci95_low:.4f}, {r.ci95_high:.4f}]</span>',
            f'; 95% interval [{r.ci95_low:.4f}, {r.ci95_high:.4f}], standard error {r.stderr:.4f} '
            f'({r.stderr_method or "?"})' if r.stderr is not None else "")


def _score(r: Optional[LeaderboardRow], date: str) -> str:
    """A table cell: the value, its 95% interval and the problems it covers beside it, and its date
    when older than tonight."""
    if r is None:
        return '<td data-value="-1">-</td>'
    if r.value is None:
        return f'<td class="failed-cell" data-value="-1" title="{_esc(r.error or "")}">failed</td>'
    stale = r.error is not None or r.date != date
    problems = "" if r.problems is None else f'<span class="problems">{r.problems} problems</span>'
    since = f' <span class="problems">(from {_esc(r.date)})</span>' if stale else ""
    klass = ' class="stale"' if stale else ""
    interval, tip = _interval(r)
    return (f'<td{klass} data-value="{r.value:.6g}" data-problems='
            f'"{r.problems if r.problems is not None else ""}" title="run {_esc(r.run_id)}{_esc(tip)}">'
            f'{_linked(f"{r.value:.4f}", r.view, task=r.task)}{interval}{problems}{since}</td>')


def _linked(text: str, view: Optional[str], **state) -> str:
    """`text` (HTML) as a link into the run's view at `state` (links.fragment), when the row names a view."""
    return f'<a class="view" href="{_esc(links.href(view, **state))}">{text}</a>' if view else text


def _tokens(cells: list[Optional[LeaderboardRow]]) -> str:
    """A model's cell of the tokens column: prompt + completion tokens of its tasks through an API."""
    used = [r for r in cells if r is not None and r.prompt_tokens is not None]
    if not used:
        return '<td class="tokens" data-value="-1">-</td>'
    prompt, completion = sum(r.prompt_tokens for r in used), sum(r.completion_tokens or 0 for r in used)
    return (f'<td class="tokens" data-value="{prompt + completion}" title="over {len(used)} task(s)">'
            f'{prompt:,} + {completion:,}</td>')


def _table(rows: list[LeaderboardRow], tasks: list[str], metric_of: dict, date: str) -> str:
    cell = {(r.model, r.task): r for r in rows if r.primary}
    errors = {r.model: r.error for r in rows if r.error}
    head = "".join(f"<th>{_esc(t)} {_esc(metric_of.get(t) or '')}</th>" for t in tasks)
    body = []
    for model in dict.fromkeys(r.model for r in rows):
        mark = ' class="failed"' if model in errors else ""
        views = {r.view for r in rows if r.model == model and r.view}  # a failed model's: its kept rows' run
        name = _linked(_esc(model), views.pop() if len(views) == 1 else None)
        label = f"{name} (failed)" if model in errors else name
        cells = [cell.get((model, t)) for t in tasks]
        body.append(f'<tr{mark}><td>{label}</td>{"".join(_score(c, date) for c in cells)}{_tokens(cells)}</tr>')
    return (f'<table class="sortable" id="leaderboard"><thead><tr><th>model</th>{head}'
            f'<th>tokens (prompt + completion)</th></tr></thead><tbody>{"".join(body)}</tbody></table>')


def _failures(failed: dict[str, str]) -> str:
    if not failed:
        return ""
    items = "".join(f'<li data-model="{_esc(m)}"><b>{_esc(m)}</b><div class="cause">{_esc(why)}</div></li>'
                    for m, why in failed.items())
    return (f'<div class="failures" id="failures"><h2>{len(failed)} model{"s" * (len(failed) != 1)} failed '
            f'tonight</h2><ul>{items}</ul></div>')


def _num(value: Optional[float]) -> str:
    return "-" if value is None else f"{value:.4f}"


def _changes(delta: list[dict], previous_date: Optional[str]) -> str:
    since = f"since {_esc(previous_date)}" if previous_date else "(no previous leaderboard)"
    title = f'<h2>{len(delta)} change{"s" * (len(delta) != 1)} {since}</h2>'
    if not delta:
        return f'{title}<p id="changes">No metric changed.</p>'
    trs = []
    for d in delta:
        change = "new" if d["before"] is None else "gone" if d["after"] is None else f"{d['change']:+.4f}"
        way = "up" if (d["change"] or 0) > 0 else "down" if (d["change"] or 0) < 0 or change == "gone" else ""
        trs.append(f'<tr><td>{_esc(d["model"])}</td><td>{_esc(d["task"])}</td><td>{_esc(d["metric"])}</td>'
                   f'<td>{_num(d["before"])}</td><td>{_num(d["after"])}</td><td class="{way}">{change}</td></tr>')
    return (f'{title}<table id="changes"><thead><tr><th>model</th><th>task</th><th>metric</th><th>before</th>'
            f'<th>after</th><th>change</th></tr></thead><tbody>{"".join(trs)}</tbody></table>')


def _trends(tasks: list[str], metric_of: dict, history: list[tuple[str, list[LeaderboardRow]]]) -> str:
    nights = [night for night, _ in history]
    out = []
    for task in tasks:
        models = list(dict.fromkeys(r.model for _, rows in history for r in rows if r.task == task))
        series = {m: [None] * len(nights) for m in models}
        for i, (_, rows) in enumerate(history):
            for r in rows:
                if r.task == task and r.primary and r.value is not None and not r.error:
                    series[r.model][i] = r.value
        out.append(trend(task, metric_of.get(task) or "", nights, series))
    return "".join(out)


def render(rows: list[LeaderboardRow], updated: str, delta: list[dict], previous_date: Optional[str],
           failed: dict[str, str], history: list[tuple[str, list[LeaderboardRow]]],
           paired: Sequence[Paired] = (), matrices: Optional[Mapping[str, Mapping[str, Confusion]]] = None) -> str:
    """rows: the leaderboard's long rows (codeeval/core/results.py LeaderboardRow); updated: tonight's
    date (the first word) and time; history: (night, rows) of every night kept, tonight's included;
    paired: tonight's comparisons (paired.compare_nights); matrices: model -> task -> tonight's
    confusion matrix (matrix.confusions_of), of the models that ran tonight (a failed one's are left out)."""
    date = updated.split()[0]
    tasks = list(dict.fromkeys(r.task for r in rows if r.primary))
    metric_of = {r.task: r.metric for r in rows if r.primary and r.metric}
    models = list(dict.fromkeys(r.model for r in rows))
    by_task = defaultdict(list)
    for r in rows:
        if r.primary and r.value is not None and not r.error:
            ci = (r.ci95_low, r.ci95_high) if r.ci95_low is not None else None
            by_task[r.task].append((r.model, r.value, ci))
    charts = "".join(bars(t, metric_of.get(t) or "", by_task[t]) for t in tasks if by_task[t])
    tonight = {m: per_task for m, per_task in (matrices or {}).items() if m not in failed}
    confusions = confusion_section(tasks, tonight)
    style = STYLE + (MATRIX_STYLE if confusions else "") + (VIEW_STYLE if any(r.view for r in rows) else "")
    return (f'<!DOCTYPE html><html><head><meta charset="utf-8"><title>codeeval leaderboard {_esc(date)}</title>'
            f'<style>{style}</style></head><body><h1>codeeval leaderboard</h1><p>Updated {_esc(updated)}; '
            f'{len(models)} models, {len(tasks)} tasks; each score with its 95% interval over problems '
            f'(docs/statistics.md) and the number of problems it covers. '
            f'Click a column header to sort.</p>{_failures(failed)}{_table(rows, tasks, metric_of, date)}'
            f'{_changes(delta, previous_date)}{flips_table(paired, previous_date)}'
            f'<h2>Trend per task</h2><div class="charts">'
            f'{_trends(tasks, metric_of, history)}</div><h2>Tonight per task</h2><div class="charts">{charts}</div>'
            f'{confusions}{sections(paired, models if paired else [], failed)}'
            f'<script>{SCRIPT}</script></body></html>\n')
