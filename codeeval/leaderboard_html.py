"""The leaderboard as one static HTML file: a sortable table (click a header) and a bar chart per
task of its primary metric. Self-contained (inline CSS, JS and SVG): it opens from a file, on a
machine with no network, and can be served by any static web server."""
from __future__ import annotations

import html
from collections import defaultdict

BAR_W, BAR_GAP, CHART_H, LABEL_W, TOP = 28, 14, 160, 40, 18

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
"""


def _esc(value) -> str:
    return html.escape(str(value), quote=True)


def _chart(task: str, metric: str, values: list[tuple[str, float]]) -> str:
    """An SVG bar chart, one bar per model, scaled to [0, max(1, top value)]."""
    top = max([1.0, *(v for _, v in values)])
    width = LABEL_W + len(values) * (BAR_W + BAR_GAP) + BAR_GAP
    bars = []
    for i, (model, value) in enumerate(values):
        h = CHART_H * value / top
        x = LABEL_W + BAR_GAP + i * (BAR_W + BAR_GAP)
        bars.append(f'<rect class="bar" data-model="{_esc(model)}" data-value="{value:.6g}" x="{x}" '
                    f'y="{CHART_H - h + TOP:.1f}" width="{BAR_W}" height="{h:.1f}"><title>{_esc(model)}: '
                    f'{value:.4f}</title></rect>'
                    f'<text x="{x + BAR_W / 2}" y="{CHART_H - h + TOP - 4:.1f}" text-anchor="middle">{value:.3f}</text>'
                    f'<text x="{x + BAR_W / 2}" y="{CHART_H + TOP + 14}" text-anchor="middle">{i + 1}</text>')
    legend = "".join(f"<li>{_esc(m)}</li>" for m, _ in values)  # numbered as the bars
    return (f'<div class="chart" data-task="{_esc(task)}"><h3>{_esc(task)} ({_esc(metric)})</h3>'
            f'<svg width="{width}" height="{CHART_H + TOP + 24}" role="img" aria-label="{_esc(task)} {_esc(metric)}">'
            f'<line class="axis" x1="{LABEL_W}" y1="{CHART_H + TOP}" x2="{width}" y2="{CHART_H + TOP}"/>'
            f'<text x="{LABEL_W - 4}" y="{TOP + 4}" text-anchor="end">{top:g}</text>'
            f'<text x="{LABEL_W - 4}" y="{CHART_H + TOP}" text-anchor="end">0</text>'
            f'{"".join(bars)}</svg><ol>{legend}</ol></div>')


def render(rows: list[dict], date: str, changes_md: str = "") -> str:
    """rows: the leaderboard's long rows (codeeval/nightly.py LEADERBOARD_SCHEMA)."""
    primary_rows = [r for r in rows if r["primary"]]
    tasks = list(dict.fromkeys(r["task"] for r in primary_rows))
    metric_of = {r["task"]: r["metric"] for r in primary_rows}
    models = list(dict.fromkeys(r["model"] for r in rows))
    cell = {(r["model"], r["task"]): r for r in primary_rows}
    head = "".join(f"<th>{_esc(t)} {_esc(metric_of[t])}</th>" for t in tasks)
    body = []
    for model in models:
        tds = []
        for task in tasks:
            r = cell.get((model, task))
            tds.append(f'<td data-value="{r["value"]:.6g}" title="{r["problems"]} problems, run {_esc(r["run_id"])}">'
                       f'{r["value"]:.4f}</td>' if r else '<td data-value="-1">-</td>')
        body.append(f'<tr><td>{_esc(model)}</td>{"".join(tds)}</tr>')
    by_task = defaultdict(list)
    for r in primary_rows:
        by_task[r["task"]].append((r["model"], r["value"]))
    charts = "".join(_chart(t, metric_of[t], by_task[t]) for t in tasks)
    changes = f"<h2>Changes</h2><pre>{_esc(changes_md)}</pre>" if changes_md else ""
    return (f'<!DOCTYPE html><html><head><meta charset="utf-8"><title>codeeval leaderboard {_esc(date)}</title>'
            f'<style>{STYLE}</style></head><body><h1>codeeval leaderboard</h1><p>Updated {_esc(date)}; '
            f'{len(models)} models, {len(tasks)} tasks. Click a column header to sort.</p>'
            f'<table class="sortable" id="leaderboard"><thead><tr><th>model</th>{head}</tr></thead>'
            f'<tbody>{"".join(body)}</tbody></table><h2>Per task</h2><div class="charts">{charts}</div>'
            f'{changes}<script>{SCRIPT}</script></body></html>\n')
