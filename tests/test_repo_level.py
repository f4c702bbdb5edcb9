"""Repo-level benchmarks (EvoCodeBench, DevEval): patching, the journal, post-processing, and
the patch -> test -> restore loop on synthetic mini repositories, with the tests running in the
execution image (real Docker) and the per-repository lock on a real Prefect API."""
from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from docker_env import containers_of, ensure_images
from repo_fixtures import MINI_UTIL, write_data, write_mini_tree

from codeeval.benchmarks.repo import post as repo_post
from codeeval.benchmarks.repo.family import make
from codeeval.benchmarks.spec import LoadOptions
from codeeval.executors.repo.jobs import RepoJob, RepoRun
from codeeval.executors.repo.lock import limit_name
from codeeval.executors.repo.patch import Journal, RestoreFailed, patched_text, sha256
from codeeval.executors.repo.testrun import TestRunner
from codeeval.generation.replay import backend as replay
from codeeval.tasks import slots

HERE = Path(__file__).resolve().parent


@pytest.fixture(scope="module")
def runner() -> TestRunner:
    return TestRunner("docker", image=ensure_images())


def job(record: dict, completion: str, root: Path, key: str, timeout_s: float = 60.0, mode: str = "deveval") -> RepoJob:
    return RepoJob(key=key, code=completion, timeout_s=timeout_s, source_root=str(root),
                   project_path=record["project_path"], file=record["completion_path"],
                   body_position=tuple(record["body_position"]), indent=record["indent"],
                   tests=tuple(record["tests"]), mode=mode)


def test_patch_replaces_the_body_span_with_the_references_blank_lines():
    start, end = 11, 13  # clamp's body, 1-based inclusive
    new = patched_text(MINI_UTIL, (start, end), "return 7\n", 4)
    lines = MINI_UTIL.splitlines(keepends=True)
    assert new == "".join(lines[:start - 1] + ["\n", "    return 7\n", "\n"] + lines[end:])
    # dedent then indent: relative indentation kept, blank lines stay empty
    assert patched_text("a\nb\n", (1, 1), "  if x:\n\n      y\n", 8) == "\n        if x:\n\n            y\n\nb\n"


def test_journal_restores_the_pristine_bytes_and_refuses_a_dirty_file(tmp_path):
    root = tmp_path / "Source_Code"
    write_mini_tree(root)
    rel = "Utilities/mini/mini/util.py"
    path = root / rel
    pristine = sha256(path.read_bytes())
    mtime = path.stat().st_mtime_ns
    journal = Journal(root, "Utilities/mini")
    with pytest.raises(ZeroDivisionError):
        with journal.patched(rel, "broken", pristine):
            assert path.read_text() == "broken" and journal.pending()
            1 / 0
    assert sha256(path.read_bytes()) == pristine and path.stat().st_mtime_ns == mtime and not journal.pending()
    path.write_text("edited by hand\n")
    with pytest.raises(RestoreFailed, match="not pristine"):
        with journal.patched(rel, "x", pristine):
            pass


def test_dependency_recall_by_static_analysis(tmp_path):
    from codeeval.benchmarks.repo.deps import dependencies, recall

    clamp, area, shout = write_mini_tree(tmp_path)
    assert recall(MINI_UTIL, clamp, "    return max(lo(), min(x, hi))\n") == 1.0
    assert recall(MINI_UTIL, clamp, "    return max(lo_, min(x, hi))\n") == 0.0
    assert dependencies(MINI_UTIL, area, "return self.w * self.h") == {"mini.util.Box.w", "mini.util.Box.h"}
    assert recall(MINI_UTIL, area, "    return self.w *\n") == 0.0  # does not parse
    assert recall(MINI_UTIL, area, "    pass\n") == 0.0


def test_lm_and_gpt_postprocessing_follow_process_completion():
    assert repo_post.extract_lm("\u0407\n    x = 1\n\n    return x\nprint('after')\n") == "    x = 1\n\n    return x"
    answer = ("Sure:\n```python\nimport os\nfrom a import (b,\n    c)\n\ndef clamp(x, lo_, hi):\n"
              '    """Doc."""\n    if x < lo_:\n        return lo_\n    return min(x, hi)\n```\nDone.')
    # imports prepended in reverse order, only a multi-line import's first line indented
    assert repo_post.extract_gpt(answer, "mini.util.clamp") == (
        "    from a import (b,\n    c)\n    import os\n    if x < lo_:\n        return lo_\n    return min(x, hi)")
    assert repo_post.extract_gpt("```\n    return 1\n  bad\n```", "m.f") == "    return 1"
    assert repo_post.extract_gpt("def clamp(:\n  pass", "m.clamp") == repo_post.EMPTY  # does not parse
    rows = [{"namespace": "a", "completion": "1"}, {"namespace": "a", "completion": "2"}]
    assert repo_post.first_per_namespace(rows)["a"]["completion"] == "1"


@pytest.mark.parametrize("path", [
    "deveval/released/without_context/deepseek-7b_greedy/completion.jsonl.gz",
    "deveval/released/without_context/gpt-4-1106-preview_greedy/completion.jsonl.gz",
    "evocodebench/released/baseline/deepseek-7b_greedy/completion.jsonl.gz",
    "evocodebench/released/baseline/gpt-4-1106_greedy/completion.jsonl.gz",
])
def test_released_completions_parse_and_postprocess(data_dir, path):
    with gzip.open(data_dir / path, "rt") as fh:
        rows = [json.loads(line) for line in fh]
    first = repo_post.first_per_namespace(rows)
    assert len(first) == len(rows) in (275, 1874)
    bodies = [repo_post.extract_gpt(r["completion"], r["namespace"]) for r in first.values()]
    # released completions are bodies already: the gpt rule keeps them (no def, no fence)
    assert sum(b.strip() == r["completion"].strip() for b, r in zip(bodies, first.values())) > 0.95 * len(bodies)
    assert all(isinstance(b, str) for b in bodies)


def test_replay_reads_the_upstream_completion_jsonl(data_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("CODEEVAL_CACHE", str(tmp_path / "cache"))
    problems = make("deveval").load(LoadOptions(data_dir))
    released = data_dir / "deveval/released/without_context/gpt-4-1106-preview_greedy/completion.jsonl.gz"
    parsed = replay.parse(released, problems)
    assert set(parsed) >= {p.task_id for p in problems} and all(len(parsed[p.task_id]) == 1 for p in problems)
    with gzip.open(released, "rt") as fh:
        bodies = {r["namespace"]: r["completion"] for r in map(json.loads, fh)}
    assert all(parsed[p.task_id] == [bodies[p.task_id]] for p in problems)  # the body as is, no prompt


def test_partial_source_tree_loads_the_covered_tasks(data_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("CODEEVAL_CACHE", str(tmp_path / "cache"))
    problems = make("deveval").load(LoadOptions(data_dir))
    meta = problems[0].repo
    assert len(problems) == 21 and meta.skipped == 1825 - 21 and meta.total == 1825
    assert "codeeval" not in problems[0].record  # the upstream record, untouched
    assert {p.record["project_path"] for p in problems} == {"Communications/twtxt", "Communications/hl7",
                                                            "Database/sqlitedict"}


def test_mini_repo_verdicts_in_docker(tmp_path, runner, monkeypatch):
    monkeypatch.setenv("CODEEVAL_CACHE", str(tmp_path / "cache"))
    root = tmp_path / "Source_Code"
    clamp, area, shout = write_mini_tree(root)
    stubborn = ("    import subprocess, time\n"
                "    subprocess.Popen(['sh', '-c', 'sleep 8; touch late'], start_new_session=True)\n"
                "    time.sleep(600)\n")
    jobs = [
        job(clamp, "    return max(lo_, min(x, hi))\n", root, "right"),
        job(clamp, "    return x\n", root, "wrong"),
        job(clamp, "    return (\n", root, "syntax"),
        job(clamp, stubborn, root, "timeout", timeout_s=4),
        job(clamp, "    pass\n", root, "empty"),
        job(clamp, "    return max(lo_, min(x, hi))\n", root, "right-again"),
        job(area, "return self.w * self.h", root, "method", mode="evocodebench"),
        job(shout, "    return s.upper() + '!'\n", root, "other-repo"),
        job(clamp, "    open('leftover.txt', 'w').write('x')\n    return max(lo_, min(x, hi))\n", root, "litter"),
    ]
    pristine = {r["completion_path"]: sha256((root / r["completion_path"]).read_bytes()) for r in (clamp, shout)}
    calls = []

    class Counting(TestRunner):
        def run(self, *args, **kw):
            calls.append(args[3])
            return super().run(*args, **kw)

    out = {o.key: o for o in RepoRun(Counting("docker", image=runner.image)).run(jobs)}
    assert {k: o.status for k, o in out.items()} == {
        "right": "passed", "wrong": "failed", "syntax": "failed", "timeout": "timeout", "empty": "failed",
        "right-again": "passed", "method": "passed", "other-repo": "passed", "litter": "passed"}
    assert not (root / "Utilities/mini/leftover.txt").exists()  # what a sample's tests leave is swept
    assert "not run" in out["empty"].detail and "process tree killed" in out["timeout"].detail
    assert out["timeout"].duration_s < 30
    assert len(calls) == 7  # identical completions ran once; the empty one never ran
    time.sleep(6)  # past the grandchild's 8 s: it died with the container
    assert not (root / "Utilities/mini/late").exists()
    for rel, digest in pristine.items():
        assert sha256((root / rel).read_bytes()) == digest
    assert not Journal(root, "Utilities/mini").pending()
    assert containers_of([os.getpid()], "repo") == []  # ours only: other runs share the engine


WORKER = r"""
import os, sys
from pathlib import Path
sys.path.insert(0, sys.argv[3])
from repo_fixtures import MINI_UTIL
from codeeval.executors.repo.jobs import RepoJob, RepoRun
from codeeval.executors.repo.lock import limit_name
from codeeval.executors.repo.testrun import TestRunner
from codeeval.tasks import slots
import json
rec = json.loads(sys.argv[2])
root = Path(sys.argv[1])
def die(job):
    print("patched", flush=True)
    os.kill(os.getpid(), 9)
from prefect import flow
@flow
def hold():
    with slots.held([limit_name(rec["project_path"])]):
        RepoRun(TestRunner("local"), on_patched=die).run([RepoJob(
            key="k", code="    return 0\n", source_root=str(root), project_path=rec["project_path"],
            file=rec["completion_path"], body_position=tuple(rec["body_position"]), indent=4,
            tests=tuple(rec["tests"]))])
hold()
"""


def test_sigkill_while_patched_is_recovered_and_its_slot_released(prefect_api, tmp_path, runner, monkeypatch):
    """A worker SIGKILLed while it holds the repository's Prefect slot with the file patched: the
    next run restores the file from the journal (hash checked) and is not blocked by the slot."""
    from prefect.client.orchestration import get_client
    from prefect.settings import PREFECT_API_URL


    monkeypatch.setenv("CODEEVAL_CACHE", str(tmp_path / "cache"))
    root = tmp_path / "Source_Code"
    clamp = write_mini_tree(root)[0]
    path = root / clamp["completion_path"]
    pristine = sha256(path.read_bytes())
    env = {**os.environ, "PREFECT_API_URL": PREFECT_API_URL.value()}
    done = subprocess.run([sys.executable, "-c", WORKER, str(root), json.dumps(clamp), str(HERE)], env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == -signal.SIGKILL and "patched" in done.stdout, done.stderr[-2000:]
    assert sha256(path.read_bytes()) != pristine and Journal(root, "Utilities/mini").pending()
    with get_client(sync_client=True) as client:
        assert client.read_global_concurrency_limit_by_name(limit_name("Utilities/mini")).active_slots == 1

    from prefect import flow

    @flow
    def again():
        run = RepoRun(runner)
        with slots.held([limit_name("Utilities/mini")]):
            return run.run([job(clamp, "    return max(lo_, min(x, hi))\n", root, "k")]), run.restored

    started = time.monotonic()
    outcomes, restored = again()
    assert time.monotonic() - started < 60  # not blocked by the dead holder's slot (nor its 300 s lease)
    assert restored == [clamp["completion_path"]] and outcomes[0].status == "passed"
    assert sha256(path.read_bytes()) == pristine and not Journal(root, "Utilities/mini").pending()
    with get_client(sync_client=True) as client:
        assert client.read_global_concurrency_limit_by_name(limit_name("Utilities/mini")).active_slots == 0


def test_two_repositories_run_in_parallel_each_serialized(prefect_api, tmp_path, runner, monkeypatch):
    """Four concurrent runs, two per repository: by the timestamps of their test runs, one
    repository's runs never overlap while the two repositories' runs do."""
    from prefect import flow

    monkeypatch.setenv("CODEEVAL_CACHE", str(tmp_path / "cache"))
    root = tmp_path / "Source_Code"
    clamp, _, shout = write_mini_tree(root, sleep=2.0)
    clamp = dict(clamp, tests=["tests/test_util.py::test_area"])  # the sleeping test
    spans: list[tuple[str, float, float]] = []

    class Timed(TestRunner):
        def run(self, project_dir, project_path, *args, **kw):
            start = time.monotonic()
            result = super().run(project_dir, project_path, *args, **kw)
            spans.append((project_path, start, time.monotonic()))
            return result

    timed = Timed("docker", image=runner.image)
    bodies = {"Utilities/mini": "    return max(lo_, min(x, hi))\n", "Text/minitext": "    return s.upper() + '!'\n"}

    @flow
    def one(record: dict, key: str):
        with slots.held([limit_name(record["project_path"])]):
            return RepoRun(timed).run([job(record, bodies[record["project_path"]], root, key)])

    results = []
    threads = [threading.Thread(target=lambda r=r, k=k: results.append(one(r, k)))
               for k, r in zip("abcd", [clamp, shout, clamp, shout])]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(o[0].status for o in results) == ["passed"] * 4
    for repo in bodies:
        mine = sorted((s, e) for p, s, e in spans if p == repo)
        assert len(mine) == 2 and mine[0][1] <= mine[1][0], f"{repo} ran twice at once: {mine}"
    a = [(s, e) for p, s, e in spans if p == "Utilities/mini"]
    b = [(s, e) for p, s, e in spans if p == "Text/minitext"]
    assert any(s1 < e2 and s2 < e1 for s1, e1 in a for s2, e2 in b), "the repositories never ran at once"


@pytest.mark.parametrize("args,message", [
    (["--tasks", "deveval-local_completion"], "needs deveval/prompt_elements.jsonl"),
    (["--tasks", "deveval", "--source-code-root", "/nonexistent/Source_Code"], "--source-code-root"),
    (["--tasks", "evocodebench"], "no evocodebench data"),
    (["--tasks", "deveval-with_context"], "unknown task"),
])
def test_bad_repo_level_input_is_one_line_and_exit_2(data_dir, tmp_path, args, message):
    done = subprocess.run([sys.executable, "-m", "codeeval", "run", "--model", "reference", "--allow_code_execution",
                           "--data-dir", str(data_dir), *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "CODEEVAL_CACHE": str(tmp_path)})
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and message in lines[0], done.stderr


def test_malformed_record_is_named(tmp_path):
    from codeeval.core.errors import UsageError

    write_data(tmp_path, "deveval", [{"namespace": "a.b"}])
    with pytest.raises(UsageError, match="record 1: missing completion_path"):
        make("deveval").load(LoadOptions(tmp_path))


def test_unbuildable_environment_is_env_error_not_a_model_failure(tmp_path, runner, monkeypatch):
    from codeeval.benchmarks.repo.execution import RepoPassAtK
    from codeeval.benchmarks.spec import Problem, RepoContext, Sample, Verdict

    monkeypatch.setenv("CODEEVAL_CACHE", str(tmp_path / "cache"))
    root = tmp_path / "Source_Code"
    clamp, _, shout = write_mini_tree(root)
    (root / "Utilities/mini/setup.py").write_text("from setuptools import setup\n"
                                                 "setup(name='mini', install_requires=['pytest==0.0.1'])\n")
    out = RepoRun(runner).run([job(clamp, "    return x\n", root, "a"),
                               job(shout, "    return s.upper() + '!'\n", root, "b")])
    assert [o.status for o in out] == ["env_error", "passed"]
    assert "pytest==0.0.1" in out[0].detail
    meta = RepoContext(project="p", setting="baseline", elements={}, skipped=0, total=2)
    problems = [Problem(t, i, "", {}, repo=meta) for i, t in enumerate(("a", "b"))]
    samples = [Sample(o.key, 0, "", Verdict(o.status, o.passed)) for o in out]
    result = RepoPassAtK().compute(problems, samples, [1])
    assert (result["pass@1"], result["scored"], result["env_error"]) == (1.0, 1, 1)


def test_prompts_for_open_chat_and_fim_models(data_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("CODEEVAL_CACHE", str(tmp_path / "cache"))
    task = make("deveval")
    problem = next(p for p in task.load(LoadOptions(data_dir)) if p.task_id == "sqlitedict.SqliteDict.get_tablenames")
    # DevEval's rule: class line, the signature verbatim, "\n\n", the requirement docstring at the indent
    assert problem.prompt.startswith("class SqliteDict:\n    def get_tablenames(filename):\n\n\n        \"\"\"\n")
    assert problem.prompt.endswith(":return: List of strings. The names of the tables in the SQLite database.\n"
                                   "        \"\"\"")
    instruction, context = task.prompting.instruction(problem)
    assert instruction == ("Please complete the get_tablenames function in the given Python code.\n\nInput Code:\n"
                           "```Python\n" + problem.prompt + "\n```\n\nCompleted Code:") and context == ""
    assert task.prompting.fim_parts is None

    root = tmp_path / "Source_Code"
    records = write_mini_tree(tmp_path / "topics")
    (tmp_path / "topics" / "Utilities").rename(root)
    rec = {k: v for k, v in records[1].items() if k != "project_path"}
    rec["completion_path"] = rec["completion_path"].removeprefix("Utilities/")
    write_data(tmp_path / "data", "evocodebench", [rec])
    (tmp_path / "data/evocodebench/prompt_elements.jsonl").write_text(json.dumps({
        "namespace": rec["namespace"], "function_name": "area", "class_name": "Box",
        "input_code": "    def area(self):\n", "contexts_above": "class Box:\n", "contexts_below": "\nX = 1\n"}) + "\n")
    monkeypatch.setenv("CODEEVAL_EVOCODEBENCH_SOURCE_CODE", str(root))
    options = LoadOptions(tmp_path / "data")
    base = make("evocodebench")
    p = base.load(options)[0]
    assert p.prompt == "class Box:\n    def area(self):\n"  # the class line for methods
    fill = make("evocodebench-local_infilling")
    p = fill.load(options)[0]
    assert fill.prompting.fim_parts(p) == ("class Box:\n    def area(self):\n", "\nX = 1\n")
    text = fill.prompting.instruction(p)[0]
    assert text.startswith("Please complete the area function in the middle of a file.\n\nThe contexts above")
    assert "The contexts below the function are:\n```Python\n\nX = 1\n\n```" in text
    assert make("evocodebench-local_completion").load(options)[0].prompt == "class Box:\n    def area(self):\n"
