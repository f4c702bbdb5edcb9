"""CodeSemBench (google-deepmind/codesembench): questions about a program's semantics (which
pointers alias, which escape), answered as JSON lists and scored by P/R/F1 against gold
answers, with no execution (`codesembench`: its `tasks/`; `codesembench-testdata`: the
reference's own unit-test tasks, `api/testdata/tasks`; each also as `<name>-emptyok`, which
scores an empty answer to an empty gold as right, where the reference's prf1 gives 0/0/0).

A task is a directory holding `metadata.json` and one file per program; a program's gold
answer is the JSON in `<answers dir>/<program file name>`. Both metadata schemas found in the
repository load: the API's (`task_type: "per_file"`, `file_pattern`, `answer_path`, default
`answers`) and the tasks' (`benchmark_type: "single file"`, `file_glob`,
`gold_answer_pattern`), whose answers actually sit in `answers/` or `answer/`. A program
without an answer is skipped and counted, and so is one whose answer is not valid JSON (named
in the log and in metrics.json); the reference raises on both.

The prompt is the program text verbatim (zero-shot: its leading comment asks the question),
one sample, stop at `[eod]`. Scoring: codeeval/benchmarks/codesembench/score.py.
"""
from __future__ import annotations

import fnmatch
import json
import logging
import posixpath
import tarfile
from pathlib import Path
from typing import Any, Mapping

from codeeval.benchmarks.codesembench.score import METRIC_FNS, SemanticPRF1
from codeeval.benchmarks.spec import LoadOptions, Problem, Prompting, TaskSpec
from codeeval.benchmarks.text import cut_at_stop
from codeeval.core.errors import UsageError

log = logging.getLogger(__name__)

STOP_WORDS = ("[eod]",)
ARCHIVE = "tasks.tar.gz"
COLLECTIONS = {"codesembench": "tasks", "codesembench-testdata": "api/testdata/tasks"}
EMPTY_OK = "-emptyok"  # a task-name suffix: an empty answer to an empty gold scores 1/1/1
LANGUAGES = {"C": "c", "C_PLUS_PLUS": "cpp", "PYTHON": "python", "JAVA": "java"}
ANSWER_DIRS = ("answers", "answer")


def read_tree(data_dir: Path, collection: str) -> dict[str, bytes]:
    """The collection's files, relative to it: `<data_dir>/codesembench/<collection>/` as a
    directory, else the same paths inside `<data_dir>/codesembench/tasks.tar.gz`."""
    base = data_dir / "codesembench"
    if (base / collection).is_dir():
        root = base / collection
        return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}
    archive = base / ARCHIVE
    if not archive.is_file():
        raise UsageError(f"no CodeSemBench data in {data_dir}: expected codesembench/{collection}/ "
                         f"or codesembench/{ARCHIVE}")
    prefix = collection.rstrip("/") + "/"
    files = {}
    try:
        with tarfile.open(archive, "r:gz") as tar:
            for member in tar.getmembers():
                name = posixpath.normpath(member.name)
                if member.isfile() and name.startswith(prefix):
                    files[name[len(prefix):]] = tar.extractfile(member).read()
    except (tarfile.TarError, OSError) as exc:
        raise UsageError(f"{archive}: not a readable tar.gz ({exc})") from None
    if not files:
        raise UsageError(f"{archive} holds no {collection}/ directory")
    return files


def task_settings(meta: Mapping[str, Any], where: str) -> dict[str, Any]:
    """Both schemas -> (name, file pattern, answer locations, metric, language, tags)."""
    if "task_type" in meta:
        if str(meta["task_type"]).upper() != "PER_FILE":
            raise UsageError(f"{where}: task_type {meta['task_type']!r} is not supported (only per_file)")
        pattern, answers = meta.get("file_pattern"), [meta.get("answer_path", "answers") + "/{file}"]
    elif "benchmark_type" in meta:
        if meta["benchmark_type"] != "single file":
            raise UsageError(f"{where}: benchmark_type {meta['benchmark_type']!r} is not supported (only single file)")
        pattern, answers = meta.get("file_glob"), [meta["gold_answer_pattern"]] if "gold_answer_pattern" in meta else []
    else:
        raise UsageError(f"{where}: neither task_type nor benchmark_type: not a CodeSemBench task")
    metric = str(meta.get("metric", "prf1")).lower()
    if metric not in METRIC_FNS:
        raise UsageError(f"{where}: unknown metric {meta.get('metric')!r} (prf1, cluster_prf1)")
    if not pattern or "name" not in meta:
        raise UsageError(f"{where}: needs a name and a file pattern")
    if str(meta.get("language", "")).upper() not in LANGUAGES:
        raise UsageError(f"{where}: unknown language {meta.get('language')!r} ({', '.join(LANGUAGES)})")
    answers += [d + "/{file}" for d in ANSWER_DIRS if d + "/{file}" not in answers]
    return {"name": meta["name"], "pattern": pattern, "answers": answers, "metric": metric,
            "language": str(meta["language"]).upper(), "tags": list(meta.get("tags", []))}


def load_task(task_dir: str, files: Mapping[str, bytes]) -> tuple[str, list[dict]]:
    """One task directory -> (its name, records of the programs with a readable gold answer)."""
    where = f"codesembench {task_dir}/metadata.json"
    try:
        meta = json.loads(files[f"{task_dir}/metadata.json"].decode("utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise UsageError(f"{where}: not valid JSON ({exc})") from None
    if not isinstance(meta, dict):
        raise UsageError(f"{where}: not a JSON object")
    settings = task_settings(meta, where)
    programs = sorted(p for p in files if posixpath.dirname(p) == task_dir
                      and fnmatch.fnmatchcase(posixpath.basename(p), settings["pattern"]))
    records, no_answer, invalid = [], [], {}
    for path in programs:
        name = posixpath.basename(path)
        answer_path = next((f"{task_dir}/{a.format(file=name)}" for a in settings["answers"]
                            if f"{task_dir}/{a.format(file=name)}" in files), None)
        if answer_path is None:
            no_answer.append(name)
            continue
        try:
            gold = json.loads(files[answer_path].decode("utf-8"))
            METRIC_FNS[settings["metric"]](gold, gold)
        except (ValueError, UnicodeDecodeError, TypeError) as exc:
            invalid[name] = f"{type(exc).__name__}: {exc}"
            log.warning("codesembench: %s/%s is not a valid answer (%s); program skipped", settings["name"],
                        answer_path[len(task_dir) + 1:], invalid[name])
            continue
        records.append({"task": settings["name"], "file": name, "program": files[path].decode("utf-8"),
                        "gold": gold, "metric": settings["metric"], "language": settings["language"],
                        "tags": settings["tags"], "answer_file": answer_path[len(task_dir) + 1:]})
    skipped = {"no_answer": no_answer, "invalid_answer": sorted(invalid)}
    return settings["name"], [dict(r, task_skipped=skipped) for r in records]


def _loader(collection: str):
    def load(options: LoadOptions) -> list[Problem]:
        if options.data_dir is None:
            raise UsageError("CodeSemBench is not on the HF hub: pass --data-dir "
                             f"(expects codesembench/{ARCHIVE} or codesembench/{collection}/)")
        files = read_tree(Path(options.data_dir), collection)
        task_dirs = sorted(posixpath.dirname(p) for p in files if posixpath.basename(p) == "metadata.json"
                           and posixpath.dirname(p) and "/" not in posixpath.dirname(p))
        if not task_dirs:
            raise UsageError(f"codesembench/{collection}: no task directory with a metadata.json")
        loaded = [load_task(d, files) for d in task_dirs]
        names = [name for name, _ in loaded]
        if len(set(names)) < len(names):
            duplicate = next(n for n in names if names.count(n) > 1)
            raise UsageError(f"codesembench/{collection}: two tasks are named {duplicate!r}")
        records = [r for _, task_records in loaded for r in task_records]
        if not records:
            raise UsageError(f"codesembench/{collection}: no program has a readable gold answer")
        return [Problem(f"{r['task']}/{r['file']}", i, r["program"], r) for i, r in enumerate(records)]

    return load


def postprocess(problem: Problem, continuation: str, extra_stops: tuple[str, ...] = ()) -> str:
    """The model's answer up to the stop string (the reference's LLM interface stops there)."""
    return cut_at_stop(continuation, STOP_WORDS + extra_stops)


def reference_solution(problem: Problem) -> str:
    """The gold answer itself, as the model would write it."""
    return json.dumps(problem.record["gold"])


def chat_parts(problem: Problem) -> tuple[str, str]:
    """For chat and instruction models: the program (its comment asks the question) as the
    user's message, nothing pre-filled."""
    return problem.prompt, ""


def make(name: str) -> TaskSpec:
    empty_ok = name.endswith(EMPTY_OK)
    collection = COLLECTIONS[name.removesuffix(EMPTY_OK)]
    scoring = "an empty answer to an empty gold scores 1" if empty_ok else "the reference's prf1 (empty vs empty: 0)"
    return TaskSpec(
        name=name, family="codesembench", load=_loader(collection), stop_words=STOP_WORDS,
        postprocess=postprocess, reference_solution=reference_solution, metrics=(SemanticPRF1(empty_ok),),
        prompting=Prompting(language="c", instruction=chat_parts),
        description=f"CodeSemBench {collection}/ (program analysis questions), zero-shot, P/R/F1 per task, macro; "
                    + scoring,
    )


TASK_NAMES = [*COLLECTIONS, *(name + EMPTY_OK for name in COLLECTIONS)]
