"""One task of a run as the view's rows: every sample with what its page shows, in one shape for
every family (executed, scored from the text, classified). Pure reads of the run's files.

Texts are model-written: they are kept as text (the page never parses them as markup) and cut at
TEXT_CAP characters with a visible mark, so one runaway output cannot make the site unusable.
A completion that is the problem's prompt plus a prefix of the raw generation (bigcode's
post-processing of a base model) is stored as the length of that prefix (`cut`), which both
marks the cut point on the page and keeps a 200-sample run's files about half as large.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from codeeval.benchmarks.spec import Problem, TaskSpec
from codeeval.core import artifacts
from codeeval.executors.base import Limits
from codeeval.pipeline.execute import verdict_of
from codeeval.pipeline.problems import read_problems
from codeeval.pipeline.score import samples_of

TEXT_CAP = 100_000  # characters of one text the site keeps
RECORD_CAP = 20_000  # characters of a problem's tests or reference
TAIL_BYTES = Limits().tail_bytes  # what the sandbox keeps of stdout and stderr (their last bytes)
# the upstream record's fields that hold a problem's tests, in the order shown (the first found)
TEST_KEYS = ("test", "tests", "test_list", "challenge_test_list", "test_setup_code", "test_imports",
             "code_context", "input_output", "answer")
NOT_RUN = "not executed"  # a sample with no execution row (generation only, or a shard that failed)
# a sample's fields in the task's index (what the table, the filters and the counts read), and its texts,
# kept apart in blocks of problems that the page loads after its first render (site.py)
COLUMNS = ("p", "s", "status", "passed", "cpu", "wall", "exit", "detail", "cut", "finish", "tests", "subsets", "answer",
           "score", "label", "predicted", "probabilities", "failing")
TEXTS = ("raw", "completion", "stdout", "stderr", "thinking")


def capped(text: Optional[str], cap: int = TEXT_CAP) -> Optional[str]:
    """`text`, or its first `cap` characters and a mark that says how long it was."""
    if text is None or len(text) <= cap:
        return text
    return text[:cap] + f"\n… [cut by the view: {len(text):,} characters, the first {cap:,} shown]"


def tail(text: Optional[str]) -> Optional[str]:
    """A sandbox tail, marked when the sandbox dropped the output before it."""
    if not text:
        return text
    if len(text.encode("utf-8", "replace")) >= TAIL_BYTES:
        return f"… [earlier output dropped: the sandbox keeps the last {TAIL_BYTES} bytes]\n" + text
    return text


def as_text(value: Any) -> Optional[str]:
    if value is None or value == "" or value == []:
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return "\n".join(value)
    return json.dumps(value, ensure_ascii=False, indent=1)


@dataclass(frozen=True)
class TaskRows:
    name: str
    kind: str  # "executed", "text" (scored from the completions: BLEU, F1) or "classification"
    problems: list[dict]  # id, prompt, tests, test_names, reference
    rows: list[list]  # COLUMNS, one list per sample, in (problem, sample) order
    texts: list[list]  # TEXTS of the same samples, in the same order
    per_sample_score: str  # what a row's `score` is ("" when none)


def problem_view(problem: Problem, spec: Optional[TaskSpec]) -> dict:
    record = problem.record if isinstance(problem.record, dict) else {}
    tests = next((record[k] for k in TEST_KEYS if record.get(k) not in (None, "", [])), None)
    reference = None
    if spec is not None:
        try:
            reference = spec.reference_solution(problem)
        except Exception:  # noqa: BLE001 - a record another version wrote: the page goes without it
            reference = None
    names = tests if isinstance(tests, list) and all(isinstance(t, str) for t in tests) else None
    return {
        "id": problem.task_id,
        "prompt": capped(problem.prompt),
        "tests": capped(as_text(tests), RECORD_CAP),
        "test_names": names,
        "reference": capped(as_text(reference), RECORD_CAP),
    }


def encode_completion(
    prompt: str, raw: Optional[str], completion: Optional[str]
) -> tuple[Optional[str], Optional[int]]:
    """(completion, cut): the completion itself, or None and the raw prefix it is `prompt` plus."""
    raw, completion = raw or "", completion or ""
    if raw and completion.startswith(prompt) and raw.startswith(completion[len(prompt) :]):
        return None, len(completion) - len(prompt)
    return completion, None


def _rows_of(folder: Path) -> list[dict]:
    return [row for path in sorted(folder.glob("shard-*.parquet")) for row in artifacts.read_rows(path)]


def _kind(spec: Optional[TaskSpec], task_dir: Path) -> str:
    if (task_dir / "predictions").is_dir() or (spec is not None and spec.classification):
        return "classification"
    if (task_dir / "executions").is_dir() or (spec is not None and spec.executes):
        return "executed"
    return "text"


def sample_scores(spec: Optional[TaskSpec], problems: list[Problem], generations: list[dict]) -> tuple[str, dict]:
    """A per-sample number for a task scored from its texts: the metric's own per-problem value
    where it has one (a mean over problems), else sentence BLEU for a BLEU task (the task's score
    is corpus BLEU; each sample's is shown to rank them). ("", {}) when neither."""
    if spec is None or spec.executes or spec.classification or not generations:
        return "", {}
    known = {p.task_id for p in problems}
    samples = samples_of(problems, [g for g in generations if g["task_id"] in known], None)
    metric = spec.metrics[0]
    values = metric.per_problem(problems, samples, [1] if spec.uses_k else [])
    if values:
        key = spec.primary if spec.primary in values else next(iter(values))
        return f"{key} of the problem", {(s.task_id, s.sample): values[key].get(s.task_id) for s in samples}
    if "bleu" in spec.primary.lower():
        from codeeval.benchmarks.codexglue.bleu import codexglue_sentence_bleu

        refs = {p.task_id: p for p in problems}
        return "sentence BLEU (smoothed; the task's score is corpus BLEU)", {
            (s.task_id, s.sample): round(
                codexglue_sentence_bleu(spec.reference_solution(refs[s.task_id]) or "", s.completion), 4
            )
            for s in samples
            if s.task_id in refs
        }
    return "", {}


def task_rows(root: Path, task: str, spec: Optional[TaskSpec]) -> TaskRows:
    """The task `task` of the run at `root` (spec: its registry entry, None when this version lacks it)."""
    layout = artifacts.RunLayout(root)
    problems, _ = read_problems(layout.problems(task))
    index = {p.task_id: i for i, p in enumerate(problems)}
    shown = [problem_view(p, spec) for p in problems]
    kind = _kind(spec, layout.task_dir(task))
    generations = _rows_of(layout.task_dir(task) / ("predictions" if kind == "classification" else "generations"))
    executions = {(r["task_id"], r["sample"]): r for r in _rows_of(layout.task_dir(task) / "executions")}
    label, scores = sample_scores(spec, problems, generations) if kind == "text" else ("", {})
    rows = []
    for g in generations:
        if (p := index.get(g["task_id"])) is None:
            continue
        row = dict.fromkeys(COLUMNS + TEXTS)
        row.update(p=p, s=g["sample"])
        if kind == "classification":
            row.update(_classified(g))
        else:
            row.update(_generated(problems[p].prompt, g))
            key = (g["task_id"], g["sample"])
            if kind == "text":
                row.update(status="scored", score=scores.get(key))
            else:
                row.update(_executed(executions.get(key), shown[p]["test_names"]))
        rows.append(([row[c] for c in COLUMNS], [row[c] or None for c in TEXTS]))
    rows.sort(key=lambda r: (r[0][0], r[0][1]))
    score_label = label or ("score" if any(r[COLUMNS.index("score")] is not None for r, _ in rows) else "")
    return TaskRows(task, kind, shown, [_trimmed(r) for r, _ in rows], [_trimmed(t) for _, t in rows], score_label)


def _classified(g: dict) -> dict:
    correct = g.get("label") == g.get("predicted")
    return dict(status="correct" if correct else "wrong", passed=correct, label=g.get("label_name"),
                predicted=g.get("predicted_name"), probabilities=g.get("probabilities"))


def _generated(prompt: str, g: dict) -> dict:
    completion, cut = encode_completion(prompt, g.get("raw"), g.get("completion"))
    return dict(raw=capped(g.get("raw")), completion=capped(completion), cut=cut, thinking=capped(g.get("thinking")),
                finish=g.get("finish_reason"))


def _executed(e: Optional[dict], test_names: Optional[list]) -> dict:
    if e is None:
        return dict(status=NOT_RUN)
    verdict = verdict_of(e)
    return dict(status=verdict.status, passed=verdict.passed, cpu=_seconds(e.get("cpu_s")),
                wall=_seconds(e.get("duration_s")), exit=e.get("exit_code"), detail=e.get("detail") or None,
                stdout=capped(tail(e.get("stdout_tail"))), stderr=capped(tail(e.get("stderr_tail"))),
                tests=list(verdict.tests) or None, subsets=dict(verdict.subsets) or None, answer=verdict.answer,
                score=verdict.score, failing=None if verdict.tests or verdict.passed
                else failing_tests(test_names, e.get("stdout_tail"), e.get("stderr_tail")))


def failing_tests(names: Optional[list], *tails: Optional[str]) -> Optional[list]:
    """The named tests pytest's summary lists as FAILED or ERROR in the output's tail (the repo-level
    tasks run every test of a problem in one pytest call, so their verdict carries no per-test codes)."""
    if not names:
        return None
    listed = {line.split(" - ")[0].split(maxsplit=1)[1].strip() for tail in tails if tail
              for line in tail.splitlines() if line.startswith(("FAILED ", "ERROR ")) and " " in line.strip()}
    return [name for name in names if name in listed] or None


def _seconds(value: Optional[float]) -> Optional[float]:
    return None if value is None else round(value, 3)


def _trimmed(values: list) -> list:
    """Without its trailing nulls (the page reads a missing field as null): a third of an index's bytes."""
    end = len(values)
    while end and values[end - 1] is None:
        end -= 1
    return values[:end]
