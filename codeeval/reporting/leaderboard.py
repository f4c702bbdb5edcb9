"""A leaderboard table from results.json files: one row per run, per task its primary metric."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Iterable, Optional

from codeeval.core.errors import UsageError
from codeeval.core.results import RunResults


def load_results(paths: Iterable[str]) -> list[RunResults]:
    results = []
    for raw in paths:
        path = Path(raw)
        path = path / "results.json" if path.is_dir() else path
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise UsageError(f"no results.json at {path}") from None
        except json.JSONDecodeError:
            raise UsageError(f"{path} is not a results.json file (not JSON)") from None
        if not isinstance(data, dict):
            raise UsageError(f"{path} is not a results.json file (not a JSON object)")
        results.append(RunResults.from_json(data))
    return results


def _cell(result: RunResults, task: str, metric: Optional[str]) -> str:
    """A metric's value, or with metric None the number of problems the run covered."""
    if not isinstance(result.metrics.get(task), dict):
        return "-"
    if metric is None:
        n = result.task(task).problems
        return str(n) if n is not None else "-"
    value = result.metrics[task].get(metric)
    if not isinstance(value, (int, float)):
        return "-"
    se = result.task(task).stderr.get(metric)
    return f"{value:.4f} ± {se:.4f}" if isinstance(se, (int, float)) else f"{value:.4f}"


def scores(results: list[RunResults]) -> str:
    """One line per run and task (tasks in order of first appearance): the primary metric, its
    standard error and 95% interval (docs/statistics.md) and the problems behind it; a long form
    of table() that stays readable with many tasks."""
    lines = []
    for result in results:
        for task in result.metrics:
            metric = result.primary(task)
            if metric is None:
                continue
            low, high = result.task(task).ci95.get(metric) or (None, None)
            interval = f"[{low:.4f}, {high:.4f}]" if low is not None else "-"
            lines.append((task, metric, result.model, _cell(result, task, metric),
                          interval, _cell(result, task, None)))
    order = {task: i for i, task in enumerate(dict.fromkeys(line[0] for line in lines))}
    lines.sort(key=lambda line: order[line[0]])  # stable: runs keep their order within a task
    header = ("task", "metric", "model", "score ± SE", "95% interval", "problems")
    widths = [max(len(x) for x in col) for col in zip(header, *lines)]
    return "\n".join("  ".join(c.rjust(w) if i == 5 else c.ljust(w) for i, (c, w) in enumerate(zip(line, widths))).rstrip()
                     for line in (header, *lines))


def table(results: list[RunResults]) -> str:
    """Markdown table: per task its primary metric (pass@1, accuracy, bleu...; ± its standard error
    where results.json has it) and the number of
    problems each run covered (a score on a subset is not comparable with one on the whole
    benchmark); a task a model was not run on shows as '-'. When a model was run through an API, a last
    column gives its prompt + completion tokens over its tasks."""
    columns: dict[str, str] = {}  # task -> its primary metric, in order of first appearance
    for result in results:
        for task in result.metrics:
            if task not in columns and result.primary(task):
                columns[task] = result.primary(task)
    header, cells = ["model"], []
    for task, metric in columns.items():
        header += [f"{task} {metric}", f"{task} problems"]
        cells += [(task, metric), (task, None)]
    rows = [[r.model] + [_cell(r, t, m) for t, m in cells] for r in results]
    if any(r.task(t).api for r in results for t in columns):  # a model behind an API: what it took
        header.append("tokens (prompt + completion)")
        for row, result in zip(rows, results):
            used = [result.task(t).api for t in columns if result.task(t).api]
            row.append(f"{sum(u['prompt_tokens'] for u in used):,} + {sum(u['completion_tokens'] for u in used):,}"
                       if used else "-")
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
    lines = [header, ["-" * w for w in widths], *rows]
    return "\n".join("| " + " | ".join(str(c).ljust(w) for c, w in zip(cells_, widths)) + " |" for cells_ in lines)
