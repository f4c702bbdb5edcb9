"""CodeSemBench's scoring (google-deepmind/codesembench `api/metrics.py`, `task_lib.py`,
`evaluation_suite.py`): prediction parsing, prf1 / cluster_prf1, macro averages, and the
suite's eval_summary.{json,md} reports.

A prediction is the first sample's completion with every `'` replaced by `"`, read as JSON;
unreadable, it is `''` (the reference's fallback). prf1 compares sets: P = |pred & gold| /
|pred|, R = |pred & gold| / |gold|, 0 when the denominator is 0, so an empty gold scored
against an empty prediction gives 0/0/0, as the reference does. cluster_prf1 compares the
sets of unordered pairs within each cluster. Each task's result is the mean over its programs;
the headline `f1` (and `precision`, `recall`) is the mean over tasks. The `-emptyok` tasks
score an empty answer to an empty gold (for cluster_prf1: no pairs in either) as 1/1/1; an
answer that does not parse, or cannot be scored, still scores 0 there.

Where the reference raises (a prediction item that is a list under prf1, a number where a
list is expected, items of mixed types in a cluster), the run would die; here that
prediction scores as `''` and is counted in `malformed_predictions` (docs/deviations.md).
"""
from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence

from codeeval.benchmarks.spec import Metric, Problem, Sample

KEYS = ("precision", "recall", "f1")


def parse_prediction(text: str) -> tuple[Any, bool]:
    """task_lib's parsing: quotes normalised, then JSON; '' when that fails. -> (value, parsed)"""
    try:
        return json.loads(text.replace("'", '"')), True
    except json.JSONDecodeError:
        return "", False


def prf1(predicted: Iterable[Any], actual: Iterable[Any], empty_match: bool = False) -> dict[str, float]:
    """The reference's prf1; `empty_match` (not the reference) scores an empty prediction
    against an empty gold as 1/1/1 instead of 0/0/0."""
    predicted_set, actual_set = set(predicted), set(actual)
    if empty_match and not predicted_set and not actual_set:
        return {"precision": 1.0, "recall": 1.0, "f1": 1.0}
    n_correct = float(len(predicted_set & actual_set))
    precision = n_correct / len(predicted_set) if len(predicted_set) else 0.0
    recall = n_correct / len(actual_set) if len(actual_set) else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall > 0.0 else 0.0
    return {"precision": precision, "recall": recall, "f1": f1}


def sequence_to_pairs(clusters: Sequence[Sequence[Any]]) -> list[tuple[Any, Any]]:
    result = []
    for cluster in clusters:
        for i in range(len(cluster)):
            for j in range(i + 1, len(cluster)):
                a, b = cluster[i], cluster[j]
                result.append((a, b) if a < b else (b, a))
    return result


def cluster_prf1(predicted, actual, empty_match: bool = False) -> dict[str, float]:
    return prf1(set(sequence_to_pairs(predicted)), set(sequence_to_pairs(actual)), empty_match)


METRIC_FNS = {"prf1": prf1, "cluster_prf1": cluster_prf1}


def score_program(metric: str, prediction: Any, gold: Any, empty_match: bool = False) -> tuple[dict[str, float], bool]:
    """(P/R/F1, whether the prediction was malformed for the metric and scored as '')."""
    fn = METRIC_FNS[metric]
    try:
        return fn(prediction, gold, empty_match), False
    except TypeError:
        return fn("", gold), True


def macroaverage(results: Sequence[dict[str, float]]) -> dict[str, float]:
    if not results:
        return {}
    return {key: sum(r[key] for r in results) / len(results) for key in results[0]}


@dataclass(frozen=True)
class SemanticPRF1(Metric):
    """Per task (a directory of programs) the macro P/R/F1 over its programs, then the mean
    over tasks; with the load's counts of programs skipped (no answer, unreadable answer)."""

    empty_match: bool = False  # the `-emptyok` tasks: an empty answer to an empty gold is right
    name = "codesembench_prf1"
    primary = "f1"

    def compute(self, problems: Sequence[Problem], samples: Sequence[Sample], ks: Sequence[int]) -> dict[str, Any]:
        first = {}
        for s in samples:  # the reference asks for one sample and reads the first
            if s.task_id not in first or s.sample < first[s.task_id].sample:
                first[s.task_id] = s
        per_task: dict[str, list[dict[str, float]]] = {}
        skipped: dict[str, dict] = {}
        malformed = unparsed = 0
        for problem in problems:
            record = problem.record
            sample = first.get(problem.task_id)
            prediction, parsed = parse_prediction(sample.completion) if sample is not None else ("", False)
            unparsed += not parsed
            # an answer that did not parse never counts as an empty answer
            result, bad = score_program(record["metric"], prediction, record["gold"], self.empty_match and parsed)
            malformed += bad
            per_task.setdefault(record["task"], []).append(result)
            skipped[record["task"]] = record["task_skipped"]
        tasks = {name: {**macroaverage(results), "programs": len(results)} for name, results in per_task.items()}
        out: dict[str, Any] = {key: (sum(t[key] for t in tasks.values()) / len(tasks) if tasks else 0.0)
                               for key in KEYS}
        no_answer = sorted(f"{t}/{f}" for t, s in skipped.items() for f in s["no_answer"])
        invalid = sorted(f"{t}/{f}" for t, s in skipped.items() for f in s["invalid_answer"])
        out.update(tasks=tasks, programs=sum(t["programs"] for t in tasks.values()),
                   skipped_no_answer=len(no_answer), invalid_answers=len(invalid), invalid_answer_files=invalid,
                   unparsed_predictions=int(unparsed), malformed_predictions=int(malformed))
        return out


def summary_markdown(tasks: dict[str, dict]) -> str:
    """evaluation_suite's eval_summary.md: a section per task, floats to 3 places."""
    parts = []
    for name, results in tasks.items():
        parts.append(f"\n## {name}\n\n")
        for key, value in results.items():
            parts.append(f"* {key}: {value:.3f}\n" if isinstance(value, float) else f"* {key}: {value}\n")
    return "".join(parts)


def write_reports(metrics: dict, out_dir: Path) -> tuple[Path, Path]:
    """eval_summary.json ({task: {precision, recall, f1}}) and eval_summary.md, as the
    reference's EvaluationSuite writes them."""
    tasks = {name: {k: v for k, v in results.items() if k in KEYS} for name, results in metrics["tasks"].items()}
    out_dir.mkdir(parents=True, exist_ok=True)
    md, js = out_dir / "eval_summary.md", out_dir / "eval_summary.json"
    md.write_text(summary_markdown(tasks), encoding="utf-8")
    js.write_text(json.dumps(tasks), encoding="utf-8")
    return js, md


def main(argv: Sequence[str]) -> int:
    """`python -m codeeval.benchmarks.codesembench.score RUN_DIR [TASK]`: the reports of a
    finished run's CodeSemBench task, next to its metrics.json."""
    if len(argv) not in (2, 3):
        print(f"usage: {argv[0]} RUN_DIR [TASK (default codesembench)]", file=sys.stderr)
        return 2
    task_dir = Path(argv[1]) / (argv[2] if len(argv) == 3 else "codesembench")
    path = task_dir / "metrics.json"
    if not path.is_file():
        print(f"no metrics.json in {task_dir}: run the task first", file=sys.stderr)
        return 2
    metrics = json.loads(path.read_text(encoding="utf-8"))["metrics"]
    if "tasks" not in metrics:
        print(f"{path} is not a CodeSemBench task's metrics", file=sys.stderr)
        return 2
    for written in write_reports(metrics, task_dir):
        print(written)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
