"""What an evaluate run says when it ends, where a person looks first: the terminal (`codeeval
run`; `prefect deployment run --watch` streams the run's log) and the evaluate run's own
summary artifact in the UI. Per task its score or its failure; each failed shard with its root
cause (failures.root_cause), the last warning logged before it, and a link to the shard's run
(a task run in-process, a flow run on a work pool)."""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Mapping, Optional, Sequence

from codeeval.core.contracts import TaskScore
from codeeval.core.errors import no_space
from codeeval.core.results import RunResults
from codeeval.pipeline.usage import compute_line, thinking_line, usage_line
from codeeval.reporting.view.links import ENTRY, VIEW_DIR


@dataclass(frozen=True)
class ShardFailure:
    task: str
    run_name: str  # as the UI shows it: generate-humaneval-shard-003
    cause: str  # the root cause, one line
    log_line: Optional[str]  # the last warning logged before it, if any
    link: str  # the shard run's page (or its id where the UI's address is not known)

    def line(self) -> str:
        warned = f" (last warning: {self.log_line})" if self.log_line else ""
        return f"{self.run_name}: {self.cause}{warned}"


def no_space_message(root: str, names: Sequence[str] = (), waiting: int = 0) -> str:
    """One line for a run whose files no longer fit on their device (`names`: the shards that
    could not be written, `waiting`: how many waited on them)."""
    which = f": {len(names)} shard{'s' * (len(names) != 1)} could not be written ({', '.join(names)})" if names else ""
    after = f", {waiting} more not run" if waiting else ""
    return (f"no space left on the device of {root}{which}{after}; free some space and run the same command "
            "again: finished shards are kept and reused")


def failure_message(root: str, failed: Sequence[ShardFailure], skipped: Sequence[str]) -> str:
    """The RunFailed text: each failed shard's root cause on its own line; a disk that filled up
    in one line (every shard it stopped fails the same way)."""
    full = [f.run_name for f in failed if no_space(f.cause)]
    if full and len(full) == len(failed):
        return no_space_message(root, full, len(skipped))
    lines = [f"{len(failed)} shards failed (a re-run retries only those; `codeeval inspect {root}` "
             "lists their samples):"]
    alike: dict[tuple[str, Optional[str]], list[ShardFailure]] = {}
    for f in failed:  # a hundred shards that failed the same way are one line, not a hundred
        alike.setdefault((f.cause, f.log_line), []).append(f)
    for group in alike.values():
        if len(group) <= GROUP_SHOWN:
            lines += [f"  {f.line()}" for f in group]
        else:
            names = _some([f.run_name for f in group], GROUP_SHOWN)
            lines.append(f"  {names} ({len(group)} shards): {group[0].line().split(': ', 1)[1]}")
    if skipped:
        lines.append(f"  not run, waiting on those: {_some(skipped)}")
    return "\n".join(lines)


def failure_headline(failed: Sequence[ShardFailure], skipped: Sequence[str]) -> str:
    """One line naming the shards that failed and those that did not run for want of them (the
    last line of the run's log: the causes are stated once, above it, by failure_message)."""
    names = [f.run_name for f in failed]
    line = f"{len(names)} shard{'s' * (len(names) != 1)} failed: {_some(names)}"
    return line + (f"; not run, waiting on {'them' if len(names) > 1 else 'it'}: {_some(skipped)}" if skipped else "")


GROUP_SHOWN = 3  # shards named one by one with their cause; more with the same cause: one line
NAMES_SHOWN = 8  # names listed in one line before "and N more"


def _some(names: Sequence[str], shown: int = NAMES_SHOWN) -> str:
    if len(names) <= shown:
        return ", ".join(names)
    return f"{', '.join(names[:shown])} and {len(names) - shown} more"


def _score(score: TaskScore) -> str:
    shown = _value(score.metrics.get(score.primary), score.stderr.get(score.primary))
    passed = f", {score.passed}/{score.samples} samples passed" if score.passed is not None else ""
    return f"{score.primary} = {shown} ({score.problems} problems{passed})"


def summary_line(scores: Mapping[str, TaskScore], failed: Sequence[ShardFailure]) -> str:
    """The summary artifact's description (what its card in the UI shows): the first root cause,
    or the scores."""
    if failed:
        return f"Failed: {failed[0].line()}"[:500]
    return "; ".join(f"{task}: {_score(score)}" for task, score in scores.items())[:500] or "nothing scored"


def summary_markdown(model: str, run_id: str, root: str, tasks: Sequence[str],
                     scores: Mapping[str, TaskScore], failed: Sequence[ShardFailure],
                     skipped: Sequence[str], versions: Optional[str] = None) -> str:
    """The evaluate run's summary artifact; `versions`: provenance.mixed's line, when its shards come
    from workers whose code differs."""
    state = "failed" if failed else "completed"
    name = model.rstrip("/").rsplit("/", 1)[-1] or model
    lines = [f"# {name}: run {run_id} {state}", "", f"Model: `{model}`  ", f"Run directory: `{root}`", "",
             *([f"**Mixed versions**: {versions}", ""] if versions else []),
             "| task | result |", "|---|---|"]
    for task in tasks:
        mine = [f for f in failed if f.task == task]
        if task in scores:
            result = _score(scores[task])
        elif mine:
            result = f"**failed**: {mine[0].cause}".replace("|", "\\|")
        else:
            result = "not scored (generation only, or waiting on a failed shard)"
        lines.append(f"| {task} | {result} |")
    if failed:
        lines += ["", "## Failed shards", ""]
        for f in failed:
            lines += [f"### [{f.run_name}]({f.link})" if f.link.startswith("http") else f"### {f.run_name} ({f.link})",
                      "", f"**{f.cause}**", ""]
            if f.log_line:
                lines += [f"> Last warning before it: {f.log_line}", ""]
        if skipped:
            lines += [f"Not run, waiting on those: {', '.join(skipped)}", ""]
        lines.append(f"Fix the cause and run again: only these shards run. `codeeval inspect {root}` lists "
                     "each shard's samples.")
    return "\n".join(lines) + "\n"


def _value(value, stderr: Optional[float] = None) -> str:
    """A value as the terminal shows it: a float to 4 places, with its standard error if any."""
    if isinstance(value, float):
        return f"{value:.4f}" + (f" ± {stderr:.4f}" if stderr is not None else "")
    return str(value) if isinstance(value, (int, str)) else "(see results.json)"


def results_table(results: RunResults) -> str:
    """The scores of a results.json as the terminal shows them, one task a line."""
    lines = []
    for name, task in results.tasks.items():
        metrics = results.metrics.get(name, {})
        values = "  ".join(f"{m}={_value(v, task.stderr.get(m))}" for m, v in metrics.items()
                           if not isinstance(v, (dict, list)))
        classifies = bool(task.reused.train[1] or task.reused.predict[1])
        if not metrics:
            counts = "generated"
        elif classifies:
            counts = f"{task.problems or 0} test records"
        elif task.passed is not None:
            counts = f"{task.passed}/{task.samples or 0} samples passed"
        else:
            counts = f"{task.samples or 0} samples of {task.problems or 0} problems"
        left = task.ks_left_out
        note = f"; pass@{', pass@'.join(map(str, left))} left out (n too small)" if left else ""
        lines.append(f"{name:<22} {values}  ({counts}{note})")
        if task.primary in task.ci95:
            lo, hi = task.ci95[task.primary]
            lines.append(f"{'':<22} {task.primary} 95% interval [{lo:.4f}, {hi:.4f}] over {task.problems} "
                         f"problems (± is the standard error, docs/statistics.md)")
        gen, exe = task.reused.generate, task.reused.execute
        if classifies:
            (trained, trainings), (predicted, predictions) = task.reused.train, task.reused.predict
            lines.append(f"{'':<22} reused {trained}/{trainings} trainings and {predicted}/{predictions} "
                         "prediction shards")
        else:
            lines.append(f"{'':<22} reused {gen[0]}/{gen[1]} generation and {exe[0]}/{exe[1]} execution shards")
        if task.api:
            lines.append(f"{'':<22} {usage_line(task.api)}")
        if task.compute:
            lines.append(f"{'':<22} {compute_line(task.compute)}")
        if task.thinking:
            lines.append(f"{'':<22} {thinking_line(task.thinking)}")
        if task.saved_generations:
            lines.append(f"{'':<22} generations saved to {task.saved_generations}")
    if results.mixed_versions:
        lines.append(f"mixed versions: {results.mixed_versions}")
    lines.append(f"results: {os.path.join(results.run_dir or '.', 'results.json')}")
    if results.run_dir:
        view = os.path.join(results.run_dir, VIEW_DIR, ENTRY)
        lines.append(f"every sample: {view} (open it in a browser, or serve it: "
                     f"codeeval view {results.run_dir} --serve)")
    return "\n".join(lines)
