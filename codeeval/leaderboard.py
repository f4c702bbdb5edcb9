"""A leaderboard table from results.json files (one row per model, one column per task metric)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Iterable

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


def table(results: list[dict]) -> str:
    """Markdown table; a task a model was not run on shows as '-'."""
    columns: list[tuple[str, str]] = []
    for result in results:
        for task, metrics in result.items():
            if task in ("config", "codeeval") or not isinstance(metrics, dict):
                continue
            for metric, value in metrics.items():
                numeric = isinstance(value, (int, float)) and not isinstance(value, bool)
                if numeric and (task, metric) not in columns:  # not BLEU's precisions list
                    columns.append((task, metric))
    header = ["model"] + [f"{task} {metric}" for task, metric in columns]
    rows = [[r.get("config", {}).get("model", "?")] +
            [f"{r[t][m]:.4f}" if m in r.get(t, {}) else "-" for t, m in columns] for r in results]
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
    line = lambda cells: "| " + " | ".join(str(c).ljust(w) for c, w in zip(cells, widths)) + " |"  # noqa: E731
    return "\n".join([line(header), "|" + "|".join("-" * (w + 2) for w in widths) + "|", *map(line, rows)])
