"""The leaderboard's paired comparisons (docs/statistics.md): each model tonight against its own run
of the previous night and against tonight's best model on each task's primary metric, with
codeeval compare's tests (McNemar's exact test for pass/fail per problem, else a paired bootstrap),
and the problems that flipped each way with where their Parquet rows are.

A model's run directory is the same every night (runs/<run_id>): a changed model or replayed file
rewrites its shards there. So every night keeps its own copy of what a comparison reads (each
task's problems, generations and executions Parquet, hard links where the filesystem allows:
a shard is replaced by a rename, never edited, so a link keeps the old night's file for nothing
until it changes) under samples/<night>/<run_id> in the leaderboard folder; the rows' `samples`
column names it, relative to that folder (the night's view is built from it: reporting/view/nights.py).
Copies no longer named by the last KEEP_NIGHTS nights' rows are removed. With CODEEVAL_STORAGE a URL
(core/storage.py) the copies are put in the store, read from it by a host that lacks them, and
removed from it.
"""
from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Iterable, Optional

from codeeval.benchmarks.registry import get_task
from codeeval.core import storage
from codeeval.core.artifacts import RunLayout
from codeeval.core.contracts import STAGES, ShardId
from codeeval.core.errors import UsageError
from codeeval.core.results import LeaderboardRow, RunResults
from codeeval.pipeline import failures
from codeeval.reporting.compare import Side, TaskComparison, check_comparable, compare_task, load_side

SAMPLES = "samples"  # under the leaderboard folder: samples/<night>/<run_id>/<task>/...
KEEP_NIGHTS = 30  # a copy named by none of the last 30 nights' rows is removed
PREVIOUS, BEST = "previous night", "best model"


@dataclass(frozen=True)
class Flip:
    task_id: str
    before: tuple[str, str]  # the other run's (Parquet file relative to the leaderboard folder, sample numbers)
    after: tuple[str, str]  # this model's tonight


@dataclass(frozen=True)
class Paired:
    """One model's primary metric on one task tonight (B) against another run of it (A)."""

    model: str
    task: str
    against: str  # PREVIOUS or BEST
    other: str  # what A is: "reference", "its run of 2026-11-24"
    result: Optional[TaskComparison] = None
    why: str = ""  # one line, when not compared
    pass_to_fail: tuple[Flip, ...] = ()
    fail_to_pass: tuple[Flip, ...] = ()
    views: tuple[Optional[str], Optional[str]] = (None, None)  # A's and B's night's view (the rows' `view`)


def keep_samples(out: Path, night: str, results: RunResults) -> str:
    """Tonight's copy of a finished run's files that a comparison reads; its path relative to `out`."""
    root, rel = Path(results.run_dir), Path(SAMPLES) / night / results.run_id
    layout = RunLayout(root)
    for task, detail in results.tasks.items():
        shards = [layout.output(ShardId(task, stage, i)).relative_to(layout.task_dir(task)) for stage in STAGES
                  for i in range(detail.shards)]  # this run's shards only, not a stale one of a larger run
        for name in ["problems.parquet", "metrics.json", *shards]:
            _link(root / task / name, out / rel / task / name)
    for name in ("run.json", "results.json"):
        _link(root / name, out / rel / name)
    return rel.as_posix()


def _link(source: Path, target: Path) -> None:
    source = storage.fetch(source)
    if not source.exists():
        return  # e.g. no executions of a task that executes nothing
    target.parent.mkdir(parents=True, exist_ok=True)
    target.unlink(missing_ok=True)
    try:
        os.link(source, target)
    except OSError:  # another filesystem, or one without hard links
        shutil.copy2(source, target)
    storage.publish(target)  # in the store beside the page, for whichever host writes the next night


def prune(out: Path, recent: Iterable[list[LeaderboardRow]]) -> list[Path]:
    """Remove the copies under out/samples that no row of `recent` (the last nights) names, here and
    in the store (where other hosts' nights are too)."""
    return prune_copies(out, SAMPLES, {r.samples for rows in recent for r in rows})


def prune_copies(out: Path, folder: str, named: set[Optional[str]]) -> list[Path]:
    """Remove each out/<folder>/<night>/<run_id> whose path relative to `out` is not in `named`, and
    each night left empty, here and in the store: the samples/ copies, and the views/ built of them."""
    samples = out / folder
    nights = set(samples.glob("*")) | set(storage.folders(samples))
    copies = set(samples.glob("*/*")) | {copy for night in nights for copy in storage.folders(night)}
    removed = []
    for copy in sorted(copies):
        if copy.relative_to(out).as_posix() not in named:
            shutil.rmtree(copy, ignore_errors=True)
            storage.remove(copy)
            removed.append(copy)
    for night in nights:
        if not any(copy.parent == night for copy in copies - set(removed)):
            if night.is_dir() and not any(night.iterdir()):
                night.rmdir()
            storage.remove(night)
    return removed


def compare_nights(out: Path, rows: list[LeaderboardRow], previous: list[LeaderboardRow],
                   failed: Iterable[str]) -> list[Paired]:
    """Per model that ran tonight and task: against the previous leaderboard's run of the same model
    (a model that failed then kept its older rows: the date says which run), and against tonight's
    best model on the task (the highest value, then the most problems)."""
    sides: dict[tuple[str, str], Side] = {}

    def compare(task: str, a: str, b: str) -> tuple[Optional[TaskComparison], str]:
        try:
            for rel in (a, b):
                if (rel, task) not in sides:  # a night another host wrote: its copy from the store
                    sides[rel, task] = load_side(storage.fetch_dir(out / rel), task, get_task(task))
            check_comparable(task, sides[a, task].problems, sides[b, task].problems)
            return compare_task(task, sides[a, task], sides[b, task]), ""
        except UsageError as exc:
            return None, str(exc)
        except Exception as exc:  # noqa: BLE001 - a missing or unreadable copy: said, not fatal
            return None, f"{task}: not compared: {failures.root_cause(exc)}"

    failed = set(failed)
    tonight = [r for r in rows if r.primary and r.value is not None and not r.error]
    before = {(r.model, r.task): r for r in previous if r.primary and r.value is not None}
    best: dict[str, LeaderboardRow] = {}
    for r in tonight:
        if r.task not in best or (r.value, r.problems or 0) > (best[r.task].value, best[r.task].problems or 0):
            best[r.task] = r
    out_list = []
    for r in (r for r in tonight if r.model not in failed):
        model, task = r.model, r.task
        old, top = before.get((model, task)), best[task]
        pairs = [(PREVIOUS, old, f"its run of {old.date}" if old else "")]
        pairs.append((BEST, None if top.model == model else top, top.model))
        for against, other, label in pairs:
            if other is None:
                why = "no previous night" if against == PREVIOUS else f"the best model on {task} tonight"
                out_list.append(Paired(model, task, against, label, why=why))
            elif not other.samples or not r.samples:
                out_list.append(Paired(model, task, against, label, why=f"{task}: no copy of the samples kept "
                                       "(a leaderboard written before samples/ was kept)"))
            else:
                result, why = compare(task, other.samples, r.samples)
                out_list.append(_with_flips(out, Paired(model, task, against, label, result, why,
                                                        views=(other.view, r.view))))
    return out_list


def _with_flips(out: Path, paired: Paired) -> Paired:
    if paired.result is None:
        return paired

    def where(text: str) -> tuple[str, str]:
        path, _, numbers = text.rpartition(" sample ")
        return (os.path.relpath(path, out), numbers) if path else ("", "")

    def flips(found) -> tuple[Flip, ...]:
        return tuple(Flip(t, where(a), where(b)) for t, a, b in found)

    result = paired.result
    return replace(paired, pass_to_fail=flips(result.pass_to_fail), fail_to_pass=flips(result.fail_to_pass))


def flips_by_model(paired: Iterable[Paired]) -> dict[str, dict]:
    """model -> task -> the problems that flipped each way since the previous night."""
    flips: dict[str, dict] = {}
    for p in paired:
        if p.against == PREVIOUS and p.result is not None:
            flips.setdefault(p.model, {})[p.task] = {"pass_to_fail": [f.task_id for f in p.pass_to_fail],
                                                     "fail_to_pass": [f.task_id for f in p.fail_to_pass]}
    return flips


def flips_markdown(paired: list[Paired], since: Optional[str]) -> list[str]:
    """The changes artifact's per-problem part: per model and task the problems that flipped
    since the previous night, each way (codeeval compare's rule for a pass)."""
    nights = [p for p in paired if p.against == PREVIOUS and p.why != "no previous night"]
    if not nights:
        return []
    lines = ["", f"## Problems that flipped since {since or 'the previous night'}", ""]
    compared = [p for p in nights if p.result is not None and p.result.flips]
    if compared:
        lines += ["| model | task | pass -> fail | fail -> pass |", "|---|---|---|---|"]
        lines += [f"| {p.model} | {p.task} | {_ids(p.pass_to_fail)} | {_ids(p.fail_to_pass)} |" for p in compared]
    for p in nights:
        if p.result is None:
            lines.append(f"- {p.model}: not compared: {p.why}")
        elif not p.result.flips:
            lines.append(f"- {p.model} {p.task}: no pass/fail per problem ({p.result.metric}), no flips listed")
    return lines


def _ids(flips: tuple[Flip, ...]) -> str:
    return ", ".join(f.task_id for f in flips) if flips else "none"
