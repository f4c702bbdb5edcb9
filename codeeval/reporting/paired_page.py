"""The leaderboard page's paired parts (codeeval/reporting/paired.py): in the changes,
per model and task the problems that flipped since the previous night; and a section per model
comparing it tonight with its previous night and with tonight's best model. Each flipped problem
links to its sample's page in each night's view (views/, reporting/view/nights.py) and to the Parquet file
holding its rows (samples/); relative links, both folders sit beside index.html."""
from __future__ import annotations

from typing import Optional, Sequence

from codeeval.reporting.charts import esc
from codeeval.reporting.paired import PREVIOUS, Flip, Paired
from codeeval.reporting.view import links

SHOWN = 20  # flipped problems listed per cell; the rest counted


def _where(label: str, where: tuple[str, str], view: Optional[str], task: str, task_id: str) -> str:
    """One night's side of a flip: its samples, linked to the first one's page in that night's view
    (where the night has one), and the Parquet file holding their rows."""
    path, numbers = where
    if not path:
        return ""
    name = path.rsplit("/", 1)[-1]
    parquet = f'<a class="parquet" href="{esc(path)}" title="{esc(path)}">{esc(name)}</a>'
    first = numbers.split(",")[0].strip()
    if view is None or not first.isdigit():
        return f'{label} {parquet} sample {esc(numbers)}'
    sample = links.href(view, task=task, sample=(task_id, int(first)))
    return f'{label} <a class="view" href="{esc(sample)}">sample {esc(numbers)}</a> ({parquet})'


def _flips(flips: Sequence[Flip], before: str, after: str, p: Paired) -> str:
    if not flips:
        return "none"
    (view_a, view_b), task = p.views, p.task
    items = "".join(f'<li data-problem="{esc(f.task_id)}"><b>{esc(f.task_id)}</b> <span class="where">'
                    f'({_where(before, f.before, view_a, task, f.task_id)}; '
                    f'{_where(after, f.after, view_b, task, f.task_id)})</span></li>' for f in flips[:SHOWN])
    more = f"<li>and {len(flips) - SHOWN} more</li>" if len(flips) > SHOWN else ""
    return f'<b>{len(flips)}</b> <ul class="flips">{items}{more}</ul>'


def _way(way: str, flips: Sequence[Flip]) -> str:
    """The cell's colour (red down, green up) only where problems flipped: "none" is no news."""
    return f' class="{way}"' if flips else ""


def flips_table(paired: Sequence[Paired], since: Optional[str]) -> str:
    """Per model and task, the problems that went pass -> fail and fail -> pass since the previous night."""
    nights = [p for p in paired if p.against == PREVIOUS and p.why != "no previous night"]
    if not nights:
        return ""
    trs, notes = [], []
    for p in nights:
        if p.result is None:
            notes.append(f"<li>{esc(p.model)}: not compared: {esc(p.why)}</li>")
        elif not p.result.flips:
            notes.append(f"<li>{esc(p.model)} {esc(p.task)}: no pass/fail per problem ({esc(p.result.metric)}), "
                         "no flips listed</li>")
        else:
            down, up = _flips(p.pass_to_fail, "before", "tonight", p), _flips(p.fail_to_pass, "before", "tonight", p)
            trs.append(f'<tr data-model="{esc(p.model)}" data-task="{esc(p.task)}"><td>{esc(p.model)}</td>'
                       f'<td>{esc(p.task)}</td><td{_way("down", p.pass_to_fail)}>{down}</td>'
                       f'<td{_way("up", p.fail_to_pass)}>{up}</td></tr>')
    table = (f'<table id="flips"><thead><tr><th>model</th><th>task</th><th>pass &rarr; fail</th>'
             f'<th>fail &rarr; pass</th></tr></thead><tbody>{"".join(trs)}</tbody></table>' if trs else "")
    return (f'<h3>Problems that flipped since {esc(since or "the previous night")}</h3>{table}'
            + (f'<ul class="notes">{"".join(notes)}</ul>' if notes else ""))


def _row(p: Paired) -> str:
    """The comparison's numbers in a row, and the problems that flipped in a row under it."""
    against = f"{esc(p.against)}: {esc(p.other)}" if p.other else esc(p.against)
    head = f'<tr data-task="{esc(p.task)}" data-against="{esc(p.against)}"'
    if p.result is None:
        return (f'{head} class="not-compared"><td>{esc(p.task)}</td><td class="against">{against}</td>'
                f'<td colspan="8">{esc(p.why)}</td></tr>')
    c = p.result
    way = "up" if c.difference > 0 else "down" if c.difference < 0 else ""
    counts = (f'<span class="down">{len(p.pass_to_fail)}</span> / <span class="up">{len(p.fail_to_pass)}</span>'
              if c.flips else "-")
    row = (f'{head} data-p="{c.p_value:.6g}"><td>{esc(p.task)}</td><td class="against">{against}</td>'
           f'<td>{esc(c.metric)}</td><td>{c.a:.4f}</td><td>{c.b:.4f}</td><td class="{way}">{c.difference:+.4f}</td>'
           f'<td>[{c.ci95[0]:+.4f}, {c.ci95[1]:+.4f}]</td><td title="{esc(c.test)}">{c.p_value:.3g} '
           f'<span class="problems">{esc(c.test.split(" (")[0])}</span></td><td>{c.problems}</td>'
           f'<td>{counts}</td></tr>')
    if not (p.pass_to_fail or p.fail_to_pass):
        return row
    flips = "".join(f'<div class="{klass}">{name}: {_flips(found, "A", "B", p)}</div>'
                    for klass, name, found in (("down", "pass &rarr; fail", p.pass_to_fail),
                                               ("up", "fail &rarr; pass", p.fail_to_pass)) if found)
    return f'{row}<tr class="flipped"><td></td><td colspan="9">{flips}</td></tr>'


def sections(paired: Sequence[Paired], models: Sequence[str], failed: dict[str, str]) -> str:
    """A section per model: its comparisons, or why there are none."""
    if not models:
        return ""
    out = []
    for model in models:
        mine = [p for p in paired if p.model == model]
        if model in failed:
            body = "<p>failed tonight: nothing to compare</p>"
        elif not mine:
            body = "<p>no score tonight: nothing to compare</p>"
        else:
            body = ('<table class="paired-table"><thead><tr><th>task</th><th>against (A)</th><th>metric</th>'
                    '<th>A</th><th>B: tonight</th><th>B - A</th><th>95% interval of B - A</th><th>p (test)</th>'
                    '<th>problems</th><th>flipped: pass &rarr; fail / fail &rarr; pass</th></tr></thead>'
                    f'<tbody>{"".join(_row(p) for p in mine)}</tbody></table>')
        out.append(f'<section class="paired" data-model="{esc(model)}"><h3>{esc(model)}</h3>{body}</section>')
    return ('<h2 id="paired">Paired comparisons</h2><p>Each model tonight (B) against its own run of the previous '
            "night and against tonight's best model on the task (A), on the task's primary metric over the problems "
            "both runs scored: McNemar's exact test when each problem passes or fails, else a paired bootstrap "
            "(docs/statistics.md). Runs of different problem sets or prompts are not compared. A flipped problem "
            "links to its samples in each run's view and to the Parquet file holding their rows.</p>" + "".join(out))
