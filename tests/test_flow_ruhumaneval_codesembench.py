"""ruHumanEval (both execution modes) and CodeSemBench end to end: the CLI, a real Prefect API,
the Docker sandbox, the `reference` oracle and replayed generations, and CodeSemBench's
eval_summary reports written from the run's metrics.json."""
from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
from test_codesembench import mock_llm

from codeeval.benchmarks.codesembench import score as codesembench_score
from codeeval.benchmarks.registry import get_task
from codeeval.benchmarks.spec import LoadOptions
from codeeval.cli import main

FIXTURES = Path(__file__).parent / "fixtures"


def data(tmp_path, data_dir) -> Path:
    """One --data-dir: the real CodeSemBench archive beside the ruHumanEval fixtures."""
    root = tmp_path / "data"
    root.mkdir()
    (root / "codesembench").symlink_to(data_dir / "codesembench")
    (root / "ruhumaneval").symlink_to(FIXTURES / "ruhumaneval")
    return root


def test_reference_oracles_end_to_end(prefect_api, data_dir, tmp_path, capsys):
    root = data(tmp_path, data_dir)
    out = tmp_path / "run"
    tasks = "ruhumaneval,ruhumaneval-mera-compat,codesembench,codesembench-testdata"
    assert main(["run", "--model", "reference", "--tasks", tasks, "--allow_code_execution",
                 "--data-dir", str(root), "--output-dir", str(out)]) == 0
    capsys.readouterr()
    results = json.loads((out / "results.json").read_text())
    # every canonical solution passes run as a module; MERA's executor fails the three that
    # need a top-level import, a top-level helper or recursion
    assert results["ruhumaneval"] == {"pass@1": 1.0}
    assert results["ruhumaneval-mera-compat"] == {"pass@1": 0.5}
    info = results["codeeval"]["tasks"]
    assert info["ruhumaneval"]["ks_left_out"] == [5, 10] and info["ruhumaneval"]["problems"] == 6
    rows = [r for p in sorted((out / "ruhumaneval-mera-compat" / "executions").glob("*.parquet"))
            for r in pq.read_table(p).to_pylist()]
    assert sorted(r["task_id"] for r in rows if not r["passed"]) == ["ruHumanEval/2", "ruHumanEval/3",
                                                                    "ruHumanEval/4"]
    sem = results["codesembench"]
    assert sem["f1"] == sem["precision"] == sem["recall"] == (5 / 6 + 1) / 2
    assert (sem["programs"], sem["skipped_no_answer"], sem["invalid_answer_files"]) == (
        8, 5, ["simple_c_alias/alias0.c"])
    assert results["codesembench-testdata"]["tasks"]["simple_c_escape"]["f1"] == 0.0  # [] vs []: 0/0/0
    assert "executions" not in {p.name for p in (out / "codesembench").iterdir()}
    assert info["codesembench"]["primary"] == "f1" and info["codesembench"]["passed"] is None


def test_replayed_mock_answers_reproduce_the_reference_suite(prefect_api, data_dir, tmp_path, capsys):
    """The reference's MockLlm answers, replayed as saved generations, give its unit-test
    numbers, and the report tool writes its eval_summary files from the run."""
    problems = get_task("codesembench-testdata").load(LoadOptions(data_dir))
    generations = tmp_path / "mock.json"
    generations.write_text(json.dumps([[mock_llm(p.prompt)] for p in problems]))
    out = tmp_path / "run"
    assert main(["run", "--tasks", "codesembench-testdata", "--load_generations_path", str(generations),
                 "--data-dir", str(data_dir), "--output-dir", str(out)]) == 0
    capsys.readouterr()
    assert codesembench_score.main(["codesembench_score", str(out), "codesembench-testdata"]) == 0
    md = (out / "codesembench-testdata" / "eval_summary.md").read_text()
    assert md.startswith("\n## simple_c_alias\n\n* precision: 0.733\n* recall: 0.611\n* f1: 0.639\n")
    assert codesembench_score.main(["codesembench_score", str(tmp_path / "nothing")]) == 2
