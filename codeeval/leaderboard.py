"""A leaderboard table from results.json files (one row per model, one column per task metric)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Iterable, Optional

from codeeval.errors import UsageError


def load_results(paths: Iterable[str]) -> list[dict]:
    results = []
    for raw in paths:
        path = Path(raw)
        path = path / "results.json" if path.is_dir() else path
        try:
            results.append(json.loads(path.read_text(encoding="utf-8")))
        except FileNotFoundError:
            raise UsageError(f"no results.json at {path}") from None
        except json.JSONDecodeError:
            raise UsageError(f"{path} is not a results.json file (not JSON)") from None
    return results


def _cell(result: dict, task: str, metric: Optional[str]) -> str:
    """A metric's value, or with metric None the number of problems the run covered."""
    if not isinstance(result.get(task), dict):
        return "-"
    if metric is None:
        n = result.get("codeeval", {}).get("tasks", {}).get(task, {}).get("problems")
        return str(n) if n is not None else "-"
    return f"{result[task][metric]:.4f}" if metric in result[task] else "-"


def table(results: list[dict]) -> str:
    """Markdown table: per task its metrics and the number of problems each run covered (a
    score on a subset is not comparable with one on the whole benchmark); a task a model
    was not run on shows as '-'."""
    tasks: dict[str, list[str]] = {}  # task -> metrics, in order of first appearance
    for result in results:
        for task, metrics in result.items():
            if task in ("config", "codeeval") or not isinstance(metrics, dict):
                continue
            names = tasks.setdefault(task, [])
            names.extend(m for m in metrics if m not in names)
    header, cells = ["model"], []
    for task, metrics in tasks.items():
        header += [f"{task} {m}" for m in metrics] + [f"{task} problems"]
        cells += [(task, m) for m in metrics] + [(task, None)]
    rows = [[r.get("config", {}).get("model", "?")] + [_cell(r, t, m) for t, m in cells] for r in results]
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
    line = lambda cells: "| " + " | ".join(str(c).ljust(w) for c, w in zip(cells, widths)) + " |"  # noqa: E731
    return "\n".join([line(header), "|" + "|".join("-" * (w + 2) for w in widths) + "|", *map(line, rows)])
