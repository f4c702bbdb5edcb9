"""The nightly leaderboard as library code: models.yaml -> RunConfigs, results.json -> long rows
(model x task x metric), and the changes since the previous night.

models.yaml:

    defaults:                      # optional: merged under every model's own keys
      data_dir: /srv/codeeval/data
      allow_code_execution: true
    models:
      - model: /models/starcoder2-3b
        backend: transformers      # optional (inferred as for --model)
        generation: {n_samples: 10, temperature: 0.2, max_length_generation: 512}
        tasks: [humaneval, mbpp]
      - model: reference
        tasks: [humaneval]

      - model: /models/unixcoder-base-nine
        training: {num_epochs: 5, batch_size: 8}   # a classification task's fine-tuning (TrainArgs)
        tasks: [codecomplex, codeclone, codedefect]

Every key but `generation` and `training` is a RunConfig field (the CLI's option names); `generation`
holds GenerationArgs fields, `training` TrainArgs fields (codeeval/training/args.py). Each model keeps
its run directory where `evaluate` keeps it (under CODEEVAL_STORAGE, else runs/: core/storage.py), so
a night reuses every shard whose inputs did not change and `codeeval inspect <run id>` finds each
model's run from any host of the storage.
"""
from __future__ import annotations

import dataclasses
import datetime as dt
import typing
from pathlib import Path
from typing import Any, Iterable, Optional, Sequence

from codeeval.core import artifacts, storage
from codeeval.core.errors import RunFailed, UsageError, did_you_mean
from codeeval.core.results import LEADERBOARD_SCHEMA, LeaderboardRow, RunResults
from codeeval.generation.base import GenerationArgs
from codeeval.pipeline import failures
from codeeval.pipeline.config import RunConfig
from codeeval.reporting.charts import short_night
from codeeval.reporting.paired import Paired, flips_markdown
from codeeval.training.args import TrainArgs

BOARD = "leaderboard"  # the leaderboard's folder when none is given: under the storage (core/storage.py shared)
HISTORY = "history"  # under the output folder: one leaderboard-<stamp>.parquet per night, never overwritten
SECTIONS = {"generation": GenerationArgs, "training": TrainArgs}  # a models file's nested mappings of options
CONFIG_FIELDS = {f.name for f in dataclasses.fields(RunConfig)} - set(SECTIONS)


def board_dir(output_dir: Optional[str]) -> Path:
    """The leaderboard's folder: `output_dir`, else BOARD under the storage."""
    return Path(output_dir) if output_dir else storage.shared(BOARD)


def load_models(path: Path, runs_dir: Optional[Path] = None) -> list[RunConfig]:
    """The models file as RunConfigs; UsageError (one line) for a missing or malformed file. A model
    without its own output_dir runs in `runs_dir`/<run_id>, else where `evaluate` would run it."""
    import yaml

    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UsageError(f"models file not found: {path}") from None
    except UnicodeDecodeError as exc:
        raise UsageError(f"{path} is not UTF-8 text (byte {exc.start})") from None
    except OSError as exc:
        raise UsageError(f"cannot read the models file {path}: {exc.strerror or exc}") from None
    except (yaml.YAMLError, RecursionError) as exc:
        raise UsageError(f"{path} is not YAML: {(str(exc).splitlines() or [type(exc).__name__])[0]}") from None
    if not isinstance(data, dict) or not isinstance(data.get("models"), list) or not data["models"]:
        raise UsageError(f"{path}: expected a `models:` list (see codeeval/reporting/nightly.py)")
    defaults = data.get("defaults") or {}
    if not isinstance(defaults, dict):
        raise UsageError(f"{path}: `defaults` must be a mapping of run options")
    return [_config(path, i, {**defaults, **entry} if isinstance(entry, dict) else entry, runs_dir)
            for i, entry in enumerate(data["models"])]


def _keys(given: set, known: set) -> str:
    """Unknown keys as a message lists them, the first's likely spelling after them."""
    shown = sorted(given, key=_key)
    hint = did_you_mean(shown[0], known) if isinstance(shown[0], str) else ""
    return ", ".join(map(_key, shown)) + (f" ({shown[0]}: {hint})" if hint else "")


def _config(path: Path, i: int, entry: Any, runs_dir: Optional[Path]) -> RunConfig:
    where = f"{path}: models[{i}]"
    if not isinstance(entry, dict) or not entry.get("model") or not entry.get("tasks"):
        raise UsageError(f"{where} needs `model` and `tasks`")
    unknown = set(entry) - CONFIG_FIELDS - set(SECTIONS)
    if unknown:
        raise UsageError(f"{where}: unknown key(s) {_keys(unknown, CONFIG_FIELDS | set(SECTIONS))}")
    sections = {}
    for section, cls in SECTIONS.items():
        values = sections[section] = entry.get(section) or {}
        if not isinstance(values, dict):
            raise UsageError(f"{where}: `{section}` must be a mapping of {section} options")
        bad = set(values) - {f.name for f in dataclasses.fields(cls)}
        if bad:
            raise UsageError(f"{where}: unknown {section} key(s) "
                             f"{_keys(bad, {f.name for f in dataclasses.fields(cls)})}")
        _check_types(f"{where}.{section}", cls, values)
    fields = {k: v for k, v in entry.items() if k not in SECTIONS}
    if isinstance(fields["tasks"], str):
        fields["tasks"] = [t.strip() for t in fields["tasks"].split(",") if t.strip()]
    _check_types(where, RunConfig, fields)
    config = RunConfig.from_dict({**fields, **sections})
    if config.output_dir is None and runs_dir is not None:
        config = dataclasses.replace(config, output_dir=str(runs_dir / config.run_id))
    return config


def _key(key: Any) -> str:
    """A key as the message shows it: itself when plain, else quoted (the message stays one line)."""
    return key if isinstance(key, str) and key.isprintable() and key.strip() == key and key else repr(key)


# the backends read their options with int()/float() (the CLI gives strings): YAML's numbers work too
LENIENT = {"backend_options": dict[str, typing.Union[str, int, float, bool]]}


def _check_types(where: str, cls, values: dict) -> None:
    """Each value of the type its dataclass field declares (YAML reads `limit: ten` as a string and
    `tasks: [1]` as integers: caught here in one line, not as a TypeError deep in the run)."""
    hints = {**typing.get_type_hints(cls), **LENIENT}
    for name, value in values.items():
        if not _fits(value, hints[name]):
            raise UsageError(f"{where}: {name} must be {_describe(hints[name])}, got {value!r:.60}")


def _fits(value: Any, hint: Any) -> bool:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is typing.Union:
        return any(_fits(value, a) for a in args)
    if origin is list:
        return isinstance(value, list) and all(_fits(v, args[0]) for v in value)
    if origin is dict:
        return isinstance(value, dict) and all(_fits(k, args[0]) and _fits(v, args[1]) for k, v in value.items())
    if hint is type(None):
        return value is None
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, hint)


def _describe(hint: Any) -> str:
    args = typing.get_args(hint)
    if typing.get_origin(hint) is typing.Union:
        return " or ".join(_describe(a) for a in args)
    if typing.get_origin(hint) is list:
        return f"a list of {_describe(args[0])}"
    if typing.get_origin(hint) is dict:
        return f"a mapping of {_describe(args[0])} to {_describe(args[1])}"
    return "null" if hint is type(None) else getattr(hint, "__name__", str(hint))


def rows_of(results: RunResults, date: str, samples: Optional[str] = None,
            view: Optional[str] = None) -> list[LeaderboardRow]:
    """One row per numeric metric of each task in a results.json, with its standard error and 95%
    interval when the score stage computed them; `samples`: the night's copy of the run's files,
    `view`: the night's view of it (reporting/view/nights.py)."""
    rows = []
    for task, detail in results.tasks.items():
        metrics = results.metrics.get(task)
        if not isinstance(metrics, dict):
            continue
        head = results.primary(task)
        api = detail.api or {}
        for metric, value in metrics.items():
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                low, high = detail.ci95.get(metric) or (None, None)
                rows.append(LeaderboardRow(
                    model=results.model, task=task, metric=metric, value=float(value), primary=metric == head,
                    problems=detail.problems, stderr=detail.stderr.get(metric), ci95_low=low, ci95_high=high,
                    stderr_method=detail.stderr_method.get(metric), run_id=results.run_id, date=date,
                    run_dir=results.run_dir, samples=samples, view=view, prompt_tokens=api.get("prompt_tokens"),
                    completion_tokens=api.get("completion_tokens")))
    return rows


def failure_cause(error: BaseException) -> str:
    """Why a model's run failed, whole: evaluate's RunFailed states each failed shard's root cause on
    a line of its own (kept, every line); any other error is its chain's root cause."""
    if isinstance(error, RunFailed) and error.__cause__ is None:
        lines = [" ".join(line.split()) for line in str(error).splitlines()]
        return "\n".join(line for line in lines if line) or failures.root_cause(error)
    return failures.root_cause(error)


def scores_text(models: Sequence[str], rows: Sequence[LeaderboardRow], failed: dict[str, str]) -> str:
    """Tonight's primary score of every model and task, or the model's whole cause: how a night's
    log (`--watch`) ends, so that nobody needs the page to know how the night went."""
    lines = []
    for model in models:
        if model in failed:
            lines += [f"{model}: failed", *(f"  {line}" for line in failed[model].splitlines())]
            continue
        lines.append(model)
        for r in rows:
            if r.model == model and r.primary:
                stderr = f" ± {r.stderr:.4f}" if r.stderr is not None else ""
                lines.append(f"  {r.task:<22} {r.metric} = {_num(r.value)}{stderr} ({r.problems} problems)")
    return "\n".join(lines)


def failed_rows(previous: list[LeaderboardRow], model: str, tasks: list[str], cause: str,
                date: str) -> list[LeaderboardRow]:
    """A failed model's rows: its previous ones (their date says how old) with tonight's cause; a
    task it has none for gets an empty row, so the model is never missing from the leaderboard."""
    kept = [dataclasses.replace(r, error=cause) for r in previous if r.model == model]
    have = {r.task for r in kept}
    return kept + [LeaderboardRow(model=model, task=task, date=date, error=cause) for task in tasks if task not in have]


def today() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d")


def stamp() -> str:
    """This moment in UTC, sortable and fit for a file name; it follows a plain date (YYYY-MM-DD)."""
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H%M%SZ")


def night_of(history_file: Path) -> str:
    """The night a history snapshot is of: leaderboard-2026-11-24T020000Z_2.parquet -> 2026-11-24T020000Z_2."""
    return history_file.stem[len("leaderboard-"):]


def history_path(out: Path, night: str) -> Path:
    """A new snapshot's path under out/history: never one that exists (two nights in one second)."""
    path, n = out / HISTORY / f"leaderboard-{night}.parquet", 1
    while path.exists():
        n += 1
        path = out / HISTORY / f"leaderboard-{night}_{n}.parquet"  # sorts after the first
    return path


History = list[tuple[str, list[LeaderboardRow]]]  # (night, rows) per snapshot, oldest first


def previous_night(history: History, previous: list[LeaderboardRow]) -> Optional[str]:
    """The night the changes are since, as "2026-11-26 02:00 UTC": the newest night of ``history``
    (read_history's, before tonight's snapshot: two nights of one date are told apart), else the
    newest date of the previous leaderboard."""
    if history:
        return f"{short_night(history[-1][0])} UTC"
    return max((r.date for r in previous), default=None)


def read_history(out: Path) -> History:
    """(night, rows) of every snapshot under out/history, oldest first: one listing of the store."""
    snapshots = sorted(storage.fetch_dir(out / HISTORY).glob("leaderboard-*.parquet"))  # the nights of other hosts too
    return [(night_of(p), _rows(p)) for p in snapshots]


def with_tonight(history: History, snapshot: Path) -> History:
    """read_history's nights with tonight's snapshot, as this host wrote it (no second listing), in order."""
    return sorted([*history, (night_of(snapshot), _rows(snapshot))], key=lambda night: night[0])


def write_leaderboard(path: Path, rows: Iterable[LeaderboardRow]) -> Path:
    return artifacts.write_table(path, (r.to_row() for r in rows), LEADERBOARD_SCHEMA)


def read_leaderboard(path: Path) -> list[LeaderboardRow]:
    """The leaderboard as the store holds it (another host may have written the last night), else this host's."""
    return _rows(path) if storage.refresh(path).exists() else []


def _rows(path: Path) -> list[LeaderboardRow]:
    return [LeaderboardRow.from_row(r) for r in artifacts.read_rows(path)]


def changes(previous: list[LeaderboardRow], current: list[LeaderboardRow]) -> list[dict]:
    """Rows whose value is new, changed or gone since the previous leaderboard."""
    def key(row: LeaderboardRow) -> tuple:
        return row.model, row.task, row.metric

    # a failed model's placeholder row (no metric) has no value to compare
    before = {key(r): r for r in previous if r.metric is not None}
    after = {key(r): r for r in current if r.metric is not None}
    out = []
    for k in sorted(set(before) | set(after)):
        old, new = before.get(k), after.get(k)
        old_v, new_v = old.value if old else None, new.value if new else None
        if old_v != new_v:
            out.append({"model": k[0], "task": k[1], "metric": k[2], "before": old_v, "after": new_v,
                        "change": None if old_v is None or new_v is None else new_v - old_v})
    return out


def changes_markdown(delta: list[dict], previous_date: Optional[str], date: str, failed: dict[str, str],
                     paired: Sequence[Paired] = ()) -> str:
    """The `leaderboard-changes` artifact: the metrics that moved, per model and task the problems
    that flipped since the previous night (`paired`: paired.compare_nights), the failures."""
    since = f"since {previous_date}" if previous_date else "(no previous leaderboard)"
    lines = [f"# Leaderboard {date}: {len(delta)} changes {since}", ""]
    if delta:
        lines += ["| model | task | metric | before | after | change |", "|---|---|---|---|---|---|"]
        lines += [f"| {d['model']} | {d['task']} | {d['metric']} | {_num(d['before'])} | {_num(d['after'])} | "
                  f"{_change(d)} |" for d in delta]
    else:
        lines.append("No metric changed.")
    lines += flips_markdown(list(paired), previous_date)
    for model, why in failed.items():  # every line of the cause (one per failed shard)
        first, *rest = why.splitlines() or [""]
        lines += ["", f"**{model} failed**: {first}", *(f"- {line}" for line in rest)]
    return "\n".join(lines) + "\n"


def _num(value: Optional[float]) -> str:
    return "-" if value is None else f"{value:.4f}"


def _change(delta: dict) -> str:
    if delta["before"] is None:
        return "new"
    return "gone" if delta["after"] is None else f"{delta['change']:+.4f}"
