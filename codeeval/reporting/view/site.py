"""`codeeval view`: a run (or runs A and B side by side) as a static site that opens from a file
on a machine with no network, or from any static web server (docs/viewer.md).

    <out>/index.html          the page, with app.js and app.css beside it; nothing fetched from elsewhere
    <out>/data/run.js         the runs, their tasks' metrics and the paired tests (small: the first page)
    <out>/data/task-NNN.js    one task's problems and its samples' verdicts, loaded when that task is opened
    <out>/data/task-NNN-tMMM.js  the texts (raw, completion, stdout, stderr, thinking) of a block of its
                              problems: a sample's page loads its block; the task's page loads them all
                              after its first render, for the search

Data files are scripts that hand their JSON to the page (`codeevalView.run(...)`), because a page
opened from a file may not fetch() its neighbours but may load scripts; every `<`, `>` and `&`
and every non-ASCII character in them is escaped, and the page puts each text into the DOM as
text, never as markup. Chunks written by Python rather than a Parquet reader in the browser: no
dependency to ship, and a task's chunk is already what the page needs (docs/viewer.md says more).
"""

from __future__ import annotations

import json
import shutil
from importlib import resources
from pathlib import Path
from typing import Optional, Sequence

from codeeval.benchmarks.registry import TASKS, get_task
from codeeval.core import artifacts, storage
from codeeval.core.errors import UsageError
from codeeval.reporting.compare import check_comparable, compare_task, load_side, run_tasks
from codeeval.reporting.view import links
from codeeval.reporting.view.links import VIEW_DIR
from codeeval.reporting.view.samples import COLUMNS, TEXTS, TaskRows, task_rows


def script(call: str, data) -> bytes:
    """`codeevalView.<call>(<data>);` with the JSON made inert inside any HTML or script context."""
    text = json.dumps(data, ensure_ascii=True, separators=(",", ":"), allow_nan=False, default=str)
    text = text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    return f"codeevalView.{call}({text});\n".encode("ascii")


def _json(path: Path) -> Optional[dict]:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def run_summary(root: Path) -> dict:
    run = _json(root / "run.json") or {}
    results = _json(root / "results.json") or {}
    return {
        "dir": str(root.resolve()),
        "model": run.get("model") or results.get("config", {}).get("model"),
        "run_id": run.get("run_id") or root.name,
        "backend": run.get("backend"),
        "generation": run.get("generation"),
        "code_version": run.get("code_version"),
    }


def task_summary(root: Path, task: str, rows: TaskRows) -> dict:
    scored = _json(root / task / "metrics.json") or {}
    return {
        k: scored.get(k)
        for k in (
            "metrics",
            "primary",
            "higher_is_better",
            "problems",
            "samples",
            "passed",
            "statuses",
            "ci95",
            "stderr",
            "stderr_method",
            "ks_left_out",
        )
    } | {"kind": rows.kind, "rows": len(rows.rows)}


def comparisons(roots: Sequence[Path], tasks: Sequence[str]) -> dict:
    """The paired test of each shared task (`codeeval compare`'s), or why there is none."""
    if len(roots) < 2:
        return {}
    out = {}
    for task in tasks:
        try:
            a, b = (load_side(root, task, get_task(task)) for root in roots)
            check_comparable(task, a.problems, b.problems)
            c = compare_task(task, a, b)
        except (UsageError, KeyError, ValueError) as exc:
            out[task] = {"error": str(exc)}
            continue
        out[task] = {
            "metric": c.metric,
            "problems": c.problems,
            "a": c.a,
            "b": c.b,
            "ci95": list(c.ci95),
            "p_value": c.p_value,
            "test": c.test,
            "flips": c.flips,
            "pass_to_fail": [t for t, _, _ in c.pass_to_fail],
            "fail_to_pass": [t for t, _, _ in c.fail_to_pass],
        }
    return out


BLOCK_BYTES = 2_000_000  # about this much of the samples' texts per file: a sample's page loads one


def write_texts(folder: Path, stem: str, task: str, sides: Sequence[TaskRows]) -> list[list]:
    """The samples' texts in files of consecutive problems (`<stem>-tNNN.js`), each holding every run's
    rows of its problems in index order; returns [first problem, end problem, file] per block."""
    by_problem: list[list[list]] = [[[] for _ in sides] for _ in sides[0].problems]
    for side, rows in enumerate(sides):
        for meta, texts in zip(rows.rows, rows.texts):
            by_problem[meta[0]][side].append(texts)
    blocks, start, size = [], 0, 0

    def close(end: int) -> None:
        name = f"{stem}-t{len(blocks):03d}.js"
        runs = [[t for p in by_problem[start:end] for t in p[side]] for side in range(len(sides))]
        (folder / name).write_bytes(script("texts", {"task": task, "block": len(blocks), "runs": runs}))
        blocks.append([start, end, name])

    for p, problem in enumerate(by_problem):
        size += sum(len(text or "") for side in problem for texts in side for text in texts)
        if size >= BLOCK_BYTES:
            close(p + 1)
            start, size = p + 1, 0
    if start < len(by_problem) or not blocks:
        close(len(by_problem))
    return blocks


def write(runs: Sequence[Path], out: Path, about: Optional[dict] = None) -> Path:
    """The site for `runs` (one, or A and B) in `out`, replacing what a previous write left there;
    returns its index.html. Tasks: run A's (with B, those both hold). `about`: what run A's summary
    says of it, over what its run.json says (a run still running has none yet)."""
    roots = [Path(r) for r in runs]
    if not 1 <= len(roots) <= 2:
        raise UsageError(f"view takes one run or two, not {len(roots)}")
    task_lists = [run_tasks(root) for root in roots]
    tasks = [t for t in task_lists[0] if all(t in other for other in task_lists[1:])]
    if not tasks:
        raise UsageError(f"the runs share no task (A: {', '.join(task_lists[0])}; B: {', '.join(task_lists[1])})")
    staging = out.with_name(out.name + ".writing")
    shutil.rmtree(staging, ignore_errors=True)
    (staging / "data").mkdir(parents=True)
    summary: dict = {
        "runs": [run_summary(r) | ((about or {}) if i == 0 else {}) for i, r in enumerate(roots)],
        "tasks": [],
        "columns": list(COLUMNS),
        "texts": list(TEXTS),
        "compare": comparisons(roots, tasks),
        "keys": list(links.KEYS),
    }
    for i, task in enumerate(tasks):
        spec = get_task(task) if task in TASKS else None
        sides = [task_rows(root, task, spec) for root in roots]
        chunk = f"task-{i:03d}.js"
        blocks = write_texts(staging / "data", f"task-{i:03d}", task, sides)
        (staging / "data" / chunk).write_bytes(
            script(
                "task",
                {
                    "name": task,
                    "kind": sides[0].kind,
                    "score_label": sides[0].per_sample_score,
                    "problems": sides[0].problems,
                    "runs": [s.rows for s in sides],
                    "blocks": blocks,
                },
            )
        )
        summary["tasks"].append(
            {
                "name": task,
                "chunk": chunk,
                "family": spec.family if spec else None,
                "runs": [task_summary(root, task, s) for root, s in zip(roots, sides)],
            }
        )
    (staging / "data" / "run.js").write_bytes(script("run", summary))
    page = resources.files("codeeval.reporting.view")
    for name, target in (("shell.html", links.ENTRY), ("app.js", "app.js"), ("app.css", "app.css")):
        (staging / target).write_bytes((page / name).read_bytes())
    if out.exists():
        shutil.rmtree(out)
    staging.rename(out)
    storage.remove(out)  # a URL store gets this site, not a mix with the previous one's chunks
    for path in sorted(out.rglob("*")):
        if path.is_file():
            storage.publish(path)
    return out / links.ENTRY


def default_out(roots: Sequence[Path]) -> Path:
    """A run's own view (<run>/view), or the pair's under run A (<A>/view-vs-<B's run id>)."""
    if len(roots) == 1:
        return roots[0] / VIEW_DIR
    return roots[0] / f"{VIEW_DIR}-vs-{run_summary(roots[1])['run_id']}"


def write_run_view(root: Path, model: str, run_id: str) -> Path:
    """The run's own view (<run>/view), written as a run ends, whole or failed, before its run.json:
    the page a shard's artifact and `codeeval run`'s last lines point at. From a store, only what
    the view reads is fetched (the shards other hosts wrote), not the run's checkpoints."""
    root = Path(root)
    for task_dir in {p.parent for p in root.glob("*/problems.parquet")}:
        storage.fetch(task_dir / "metrics.json")
        for stage in ("generate", "execute", "predict"):
            storage.fetch_dir(task_dir / artifacts.STAGE_FOLDERS[stage])
    return write([root], root / VIEW_DIR, about={"model": model, "run_id": run_id})
