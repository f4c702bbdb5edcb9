"""What failed in a run, said the same way in the Prefect UI (a shard's markdown artifact) and
on the terminal (`codeeval inspect RUN`): the failing samples of an execution shard, and the
error of a shard whose task run failed, each with where its Parquet file lies.

A shard whose task run raises leaves `<task>/errors/<stage>-shard-NNNNN.json` (its error, the
samples it held, the file it was to write); the next success of that shard removes it. So the
run directory alone tells `inspect` everything the UI shows.
"""
from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
import traceback
from collections import Counter
from pathlib import Path
from typing import Callable, Iterable, Iterator, Optional

from codeeval.core import artifacts
from codeeval.core.contracts import ShardId
from codeeval.core.errors import Infrastructure
from codeeval.pipeline import waits

SHOWN = 20  # failing samples listed per shard; the Parquet file has them all
TAIL_LINES = 3

# Others' exceptions worth a retry, by class name anywhere in the MRO, so that optional libraries
# need not be imported to be recognised (and requests' ConnectionError, not the builtin's subclass,
# counts too). codeeval's own say so by their base class, core/errors.Infrastructure.
LIBRARY_INFRASTRUCTURE = frozenset({
    "ConnectionError", "TimeoutError", "BrokenPipeError",  # builtins (network, engine sockets), requests
    "APIConnectionError", "APITimeoutError", "InternalServerError", "RateLimitError",  # openai
    "ConnectError", "ReadTimeout", "RemoteProtocolError",  # httpx
    "DockerException",  # docker SDK
})


def is_infrastructure(error: BaseException) -> bool:
    """Whether a retry may succeed: a sandbox, engine or network failure. A model that fails
    (missing weights, a backend error, bad output) fails the same way again: never retried."""
    return isinstance(error, Infrastructure) or any(c.__name__ in LIBRARY_INFRASTRUCTURE for c in type(error).__mro__)


CAUSE_CHARS = 400  # a root cause is one line, long enough for the reason that matters


def root_cause(error: BaseException) -> str:
    """The innermost exception of the chain (`raise ... from`, or raised while handling), with all
    of its message on one line: the outer layers of a chain say where, the innermost says why
    (a tokenizer ValueError's first line ends at "from one of:", its reason is further down)."""
    seen = {id(error)}
    while True:
        inner = error.__cause__ or (None if error.__suppress_context__ else error.__context__)
        if inner is None or id(inner) in seen:
            break
        seen.add(id(inner))
        error = inner
    text = " ".join(str(error).split())
    line = f"{type(error).__name__}: {text}" if text else type(error).__name__
    return line if len(line) <= CAUSE_CHARS else line[:CAUSE_CHARS - 3] + "..."


# Libraries whose loggers do not propagate to the root logger (transformers sets propagate=False):
# their warnings are often the reason an exception only hints at.
QUIET_LOGGERS = ("transformers", "vllm")


class _Warnings(logging.Handler):
    """WARNING and above, from one thread only (shards of a run share the process)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.thread = threading.get_ident()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.thread == self.thread:
            with contextlib.suppress(Exception):
                self.lines.append(" ".join(record.getMessage().split())[:CAUSE_CHARS])


@contextlib.contextmanager
def decisive_log() -> Iterator[list[str]]:
    """The warnings logged in this thread meanwhile; the last one before a failure is usually the
    decisive line (a tokenizer that cannot load is preceded by "model of type X ...")."""
    handler = _Warnings()
    loggers = [logging.getLogger(), *map(logging.getLogger, QUIET_LOGGERS)]
    for logger in loggers:
        logger.addHandler(handler)
    try:
        yield handler.lines
    finally:
        for logger in loggers:
            logger.removeHandler(handler)


def artifact_key(kind: str, *parts: str) -> str:
    """A Prefect artifact key (lowercase letters, digits and dashes): the kind (`failures`,
    `summary`), then the parts: the task run's name as the UI shows it
    (`generate-humaneval-shard-000`), then the run id, so that no two runs share a key."""
    return "".join(c if c.isalnum() else "-" for c in "-".join((kind, *parts)).lower()).strip("-")


def _tail(text: Optional[str], lines: int = TAIL_LINES) -> list[str]:
    return (text or "").strip().splitlines()[-lines:]


def samples_markdown(name: str, shard: str, rows: list[dict], parquet: str, shown: int = SHOWN,
                     view: Optional[Callable[..., str]] = None) -> Optional[str]:
    """The failing samples of an execution shard (None when every sample passed). `view(**state)`: the
    address of a state of the run's view (reporting/view/links.py), when it can be linked."""
    failed = [r for r in rows if r["passed"] is False]
    if not failed:
        return None
    statuses = ", ".join(f"{k}={v}" for k, v in sorted(Counter(r["status"] for r in rows).items()))
    lines = [f"# {name} {shard}: {len(failed)} of {len(rows)} samples failed", "",
             f"Statuses: {statuses}  ", f"Parquet: `{parquet}`  "]
    if view is not None:
        lines.append(f"Every sample of the run: [the run's view]({view(task=name, verdict='failed')})")
    lines += ["", "| task id | sample | status | detail |", "|---|---|---|---|"]
    link = (lambda r: view(task=name, sample=(r["task_id"], r["sample"]))) if view else (lambda r: None)
    lines += [f"| {_linked(r['task_id'], link(r))} | {r['sample']} "
              f"| {r['status']} | {_cell(r['detail'])} |" for r in failed[:shown]]
    lines.append("")
    for r in failed[:shown]:
        tail = _tail(r["stderr_tail"] or r["detail"])
        if tail:
            lines += [f"## {r['task_id']} sample {r['sample']}: {r['status']}", "```", *tail, "```", ""]
    if len(failed) > shown:
        lines.append(f"... and {len(failed) - shown} more (the Parquet file has them all)")
    return "\n".join(lines)


def _linked(text: str, url: Optional[str]) -> str:
    return f"[{_cell(text)}]({url})" if url else _cell(text)


def _cell(text: Optional[str]) -> str:
    return (text or "").replace("|", "\\|").replace("\n", " ")[:120]


# ---- a shard whose task run raised --------------------------------------------------------

def record_error(path: Path, *, name: str, stage: str, run_name: str, error: BaseException,
                 samples: Iterable[tuple[str, int]], parquet: str, inputs: dict[str, str],
                 log_line: Optional[str] = None) -> dict:
    """Write the error record of a failed shard (atomically) and return it: `error` is the root
    cause, `log_line` the last warning logged before it (see decisive_log)."""
    trace = "".join(traceback.format_exception(type(error), error, error.__traceback__))
    record = {
        "task": name, "stage": stage, "run_name": run_name, "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "error": root_cause(error), "log_line": log_line,
        "retried": is_infrastructure(error), "traceback_tail": trace.strip().splitlines()[-12:],
        "samples": [list(s) for s in samples], "parquet": parquet, "inputs": inputs,
    }
    artifacts.write_json(path, record)
    return record


def clear_error(path: Path) -> None:
    path.unlink(missing_ok=True)


def error_markdown(record: dict, shown: int = SHOWN) -> str:
    samples = record["samples"]
    kind = "an infrastructure error (retried)" if record["retried"] else "a model or input error (not retried)"
    lines = [f"# {record['run_name']} failed", "",
             f"**{record['error']}**  ",
             *([f"Last warning before it: {record['log_line']}  "] if record.get("log_line") else []),
             f"Kind: {kind}  ",
             f"Was to write: `{record['parquet']}`  "]
    lines += [f"Input: `{path}`  " for path in record["inputs"].values()]
    if samples:  # (a classification task's training has none: it trains on its split files)
        lines += ["", f"{len(samples)} samples were in this shard:", "",
                  "| task id | sample | status |", "|---|---|---|"]
        lines += [f"| {task_id} | {sample} | error |" for task_id, sample in samples[:shown]]
        if len(samples) > shown:
            lines.append(f"| ... {len(samples) - shown} more | | |")
    lines += ["", "```", *record["traceback_tail"], "```"]
    return "\n".join(lines)


# ---- the whole run, from its files ---------------------------------------------------------

def _shard_name(path: Path) -> str:
    return path.stem  # shard-00003


def run_report(root: Path) -> tuple[str, int]:
    """`codeeval inspect`: per task the shard counts, each failed shard's error and each
    execution shard's failing samples. Returns (markdown, number of failed shards)."""
    if not root.is_dir():
        raise FileNotFoundError(root)
    tasks = sorted(p.parent.name for p in root.glob("*/problems.parquet"))
    if not tasks:
        raise FileNotFoundError(f"{root} holds no task directory (<task>/problems.parquet)")
    parts, failed_shards = [f"# run {root.name}", f"Directory: `{root}`", ""], 0
    layout = artifacts.RunLayout(root)
    for name in tasks:
        task_dir = layout.task_dir(name)
        gens = sorted((task_dir / "generations").glob("shard-*.parquet"))
        execs = sorted((task_dir / "executions").glob("shard-*.parquet"))
        errors = sorted(layout.errors(name).glob("*.json"))
        failed_samples = 0
        sample_parts = []
        for path in execs:
            rows = artifacts.read_rows(path)
            failed_samples += sum(r["passed"] is False for r in rows)
            text = samples_markdown(name, _shard_name(path), rows, str(path))
            if text:
                sample_parts.append("#" + text)
        scored = "scored" if (task_dir / "metrics.json").exists() else "not scored"
        records = [json.loads(path.read_text(encoding="utf-8")) for path in errors]
        # a failed shard's samples are listed with status error: counted as such, apart from those that ran and failed
        held = sum(len(r["samples"]) for r in records)
        if (predictions := sorted((task_dir / "predictions").glob("shard-*.parquet"))) or \
                layout.training(name).is_dir():  # a classification task
            wrong = sum(r["predicted"] != r["label"] for path in predictions
                        for r in artifacts.read_rows(path, ("label", "predicted")))
            trained = "trained" if layout.output(ShardId(name, "train", 0)).exists() else "not trained"
            parts.append(f"## {name}: {trained}, {len(predictions)} prediction shards written, {len(errors)} failed "
                         f"shards, {wrong} misclassified test records in the shards written, {scored}")
        else:
            parts.append(f"## {name}: {len(gens)} generation and {len(execs)} execution shards written, "
                         f"{len(errors)} failed shards ({held} samples, status error), "
                         f"{failed_samples} failing samples in the shards written, {scored}")
        parts.append("")
        if waiting := waits.report_lines(layout.waits(name)):
            parts += ["Waiting for a slot:", *waiting, ""]
        for record in records:
            failed_shards += 1
            parts += ["#" + error_markdown(record), ""]
        parts += sample_parts
    return "\n".join(parts).rstrip() + "\n", failed_shards
