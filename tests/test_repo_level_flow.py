"""Repo-level tasks through the whole flow (CLI, real Prefect API, tests in the execution image):
DevEval on the three real projects in ../shared (the oracle and both released greedy files) and
EvoCodeBench on a synthetic mini tree. Every patched file must be pristine afterwards."""
from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from docker_env import ensure_images
from repo_fixtures import write_mini_tree

from codeeval.cli import main
from codeeval.executors.repo.patch import JOURNAL_DIR, sha256

RELEASED = "deveval/released/without_context/{}_greedy/completion.jsonl.gz"
# pass@1 of the released greedy files on the 21 tasks of twtxt, python-hl7 and sqlitedict
# (measured here; the authors publish only full-benchmark numbers: 17.00 and 12.71 over 1825).
# DeepSeek's `SqliteDict.commit` is `pass`: it fails here; run in place after a correct sample
# (whose tests leave their database behind) it would pass: codeeval/executors/repo/tree.py sweeps that.
EXPECTED = {"reference": 21, "gpt-4-1106-preview": 2, "deepseek-7b": 3}
# Recall@1 by the static analysis over the 20 of those tasks with reference dependencies (the
# oracle misses what pyan infers through `self.conn = SqliteMultithread(...)` and a re-export)
RECALL = {"reference": 0.9295, "gpt-4-1106-preview": 0.2256, "deepseek-7b": 0.2773}


def rows(run_dir: Path, task: str) -> list[dict]:
    return [r for p in sorted((run_dir / task / "executions").glob("*.parquet")) for r in pq.read_table(p).to_pylist()]


def tree_digests(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): sha256(p.read_bytes()) for p in sorted(root.rglob("*"))
            if p.is_file() and JOURNAL_DIR not in p.parts}


@pytest.fixture(scope="module")
def images():
    return ensure_images()


@pytest.mark.parametrize("model", list(EXPECTED))
def test_deveval_real_projects_oracle_and_released_files(prefect_api, data_dir, tmp_path, capsys, images, model,
                                                        codeeval_cache):
    args = ["--model", "reference"] if model == "reference" else \
        ["--load_generations_path", str(data_dir / RELEASED.format(model))]
    out = tmp_path / "run"
    assert main(["run", *args, "--tasks", "deveval", "--allow_code_execution", "--data-dir", str(data_dir),
                 "--output-dir", str(out)]) == 0
    capsys.readouterr()
    results = json.loads((out / "results.json").read_text())["deveval"]
    assert (results["covered"], results["skipped"], results["env_error"]) == (21, 1804, 0)
    executed = rows(out, "deveval")
    assert len(executed) == 21 and sum(r["passed"] for r in executed) == EXPECTED[model]
    assert results["pass@1"] == pytest.approx(EXPECTED[model] / 21)
    assert results["recall@1"] == pytest.approx(RECALL[model], abs=1e-4) and results["recall_tasks"] == 20
    assert results["recall_source"] == "ast"  # ../shared has no Dependency_Data: static analysis alone
    if model == "reference":
        assert set(results["failing_by_repository"].values()) == {0}
    # every working copy is pristine: byte for byte the tarball's files
    work = codeeval_cache / "source-code"
    for tree in work.iterdir():
        if tree.is_dir():
            assert not (tree / ".codeeval-journal").exists()
    assert not any((codeeval_cache / JOURNAL_DIR).rglob("*.json"))
    import tarfile

    for tarball in sorted((data_dir / "deveval" / "Source_Code").glob("*/*.tar.gz")):
        with tarfile.open(tarball) as tar:
            for member in tar.getmembers():
                if member.isfile() and member.name.endswith(".py"):
                    copy = next(t for t in work.iterdir() if (t / member.name).exists()) / member.name
                    assert sha256(copy.read_bytes()) == sha256(tar.extractfile(member).read()), member.name


def test_evocodebench_on_a_mini_tree_per_test_runs(prefect_api, tmp_path, capsys, images, monkeypatch):
    """EvoCodeBench's layout (Source_Code/<Project>/, completion_path from the project) and its
    prompt elements; the oracle passes and a replayed wrong body fails, the tree stays pristine."""
    source = tmp_path / "Source_Code"
    records = write_mini_tree(tmp_path / "topics")
    (tmp_path / "topics" / "Utilities").rename(source)
    # a task whose ground truth fails its own (broken) test: --exclude-failing-oracles leaves it out
    (source / "mini" / "tests" / "test_broken.py").write_text("from mini.util import lo\n\n\ndef test_lo():\n"
                                                             "    assert lo() == 1\n")
    lo_line = 6  # `    return 0` in repo_fixtures.MINI_UTIL
    assert (source / "mini/mini/util.py").read_text().splitlines()[lo_line - 1] == "    return 0"
    records.append(dict(records[0], namespace="mini.util.lo", signature_position=[lo_line - 1, lo_line - 1],
                        body_position=[lo_line, lo_line], tests=["tests/test_broken.py::test_lo"]))
    ecb = []
    for r in records[:2] + records[3:]:
        rec = {k: v for k, v in r.items() if k != "project_path"}
        rec["completion_path"] = rec["completion_path"].removeprefix("Utilities/")
        rec["domain"] = "Utilities"
        ecb.append(rec)
    data = tmp_path / "data" / "evocodebench"
    data.mkdir(parents=True)
    (data / "data.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ecb))
    (data / "prompt_elements.jsonl").write_text("".join(json.dumps({
        "namespace": r["namespace"], "function_name": r["namespace"].split(".")[-1],
        "class_name": "Box" if r["type"] == "method" else "", "input_code": "    def f():\n",
        "contexts_above": "import time\n", "contexts_below": ""}) + "\n" for r in ecb))
    monkeypatch.setenv("CODEEVAL_EVOCODEBENCH_SOURCE_CODE", str(source))
    before = tree_digests(source)
    out = tmp_path / "oracle"
    assert main(["run", "--model", "reference", "--tasks", "evocodebench", "--allow_code_execution",
                 "--data-dir", str(tmp_path / "data"), "--output-dir", str(out)]) == 0
    results = json.loads((out / "results.json").read_text())["evocodebench"]
    assert results["pass@1"] == pytest.approx(2 / 3) and (results["covered"], results["skipped"]) == (3, 0)
    assert results["failing_by_repository"] == {"mini": 1}
    wrong = tmp_path / "wrong.jsonl"
    wrong.write_text(json.dumps({"namespace": "mini.util.clamp", "completion": "    return x\n"}) + "\n" +
                     json.dumps({"namespace": "mini.util.Box.area", "completion": "        return self.w * self.h\n"})
                     + "\n" + json.dumps({"namespace": "mini.util.lo", "completion": "    return 1\n"}) + "\n")
    for flag, pass1 in (([], 2 / 3), (["--exclude-failing-oracles"], 1 / 2)):
        out = tmp_path / f"replay{len(flag)}"
        assert main(["run", "--tasks", "evocodebench", "--load_generations_path", str(wrong), "--allow_code_execution",
                     "--data-dir", str(tmp_path / "data"), "--output-dir", str(out), *flag]) == 0
        capsys.readouterr()
        verdicts = {r["task_id"]: r["status"] for r in rows(out, "evocodebench")}
        assert verdicts == {"mini.util.clamp": "failed", "mini.util.Box.area": "passed", "mini.util.lo": "passed"}
        results = json.loads((out / "results.json").read_text())["evocodebench"]
        assert results["pass@1"] == pytest.approx(pass1)
        assert results.get("excluded_failing_oracles") == (["mini.util.lo"] if flag else None)
    assert tree_digests(source) == before
