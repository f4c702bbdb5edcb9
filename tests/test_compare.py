"""`codeeval compare` on real runs made by the CLI (`python -m codeeval`): the reference oracle
and replayed generations with wrong programs in chosen problems, HumanEval's first 10 problems
executed locally; CoNaLa (BLEU, no execution) for the paired bootstrap. The p-values are checked
by hand (McNemar: 2 P(X <= min(b, c)), X ~ Bin(b + c, 1/2))."""
from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Optional

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import DATA
from view_data import site_data

from codeeval.benchmarks.registry import get_task
from codeeval.benchmarks.spec import LoadOptions
from codeeval.reporting.compare import MCNEMAR, compare_runs, mcnemar_exact

LIMIT = 10


def codeeval(*args: str, cwd: Path, env: Optional[dict] = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "codeeval", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=300, env={**os.environ, **(env or {})})


def run(cwd: Path, name: str, task: str, *args: str, env: Optional[dict] = None) -> Path:
    done = codeeval("run", "--tasks", task, "--executor", "local", "--allow_code_execution",
                    "--data-dir", str(DATA), "--output-dir", str(cwd / name), *args, cwd=cwd, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    return cwd / name


def with_wrong_programs(programs: list[list[str]], wrong: dict[int, list[int]], entry_points: list[str]) -> list:
    """The programs with those of `wrong` ({problem: [samples]}) made wrong: the entry point
    redefined at the end to return None (a program that runs and fails its tests)."""
    out = [list(samples) for samples in programs]
    for i, samples in wrong.items():
        for j in samples:
            out[i][j] += f"\n\ndef {entry_points[i]}(*args, **kwargs):\n    return None\n"
    return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory, data_dir):
    """ref: the oracle; x: wrong on problems 0, 1; y: wrong on problems 2..7; ref5: the oracle on 5
    problems; ref2 / y2: two samples per problem, y2 wrong on both samples of 0..3 and one of 4."""
    root = tmp_path_factory.mktemp("compare")
    entry = [p.record["entry_point"] for p in get_task("humaneval").load(LoadOptions(data_dir=data_dir))[:LIMIT]]
    common = ["--limit", str(LIMIT)]
    out = {"ref": run(root, "ref", "humaneval", "--model", "reference", *common, "--save_generations",
                      "--save_generations_path", str(root / "gens.json"))}
    programs = json.loads((root / "gens_humaneval.json").read_text())
    for name, wrong in (("x", {0: [0], 1: [0]}), ("y", {i: [0] for i in range(2, 8)})):
        path = root / f"{name}.json"
        path.write_text(json.dumps(with_wrong_programs(programs, wrong, entry)))
        out[name] = run(root, name, "humaneval", "--model", name, "--load_generations_path", str(path), *common)
    out["ref5"] = run(root, "ref5", "humaneval", "--model", "reference", "--limit", "5")
    out["ref2"] = run(root, "ref2", "humaneval", "--model", "reference", *common, "--n_samples", "2",
                      "--save_generations", "--save_generations_path", str(root / "gens2.json"))
    programs2 = json.loads((root / "gens2_humaneval.json").read_text())
    path = root / "y2.json"
    wrong2 = {0: [0, 1], 1: [0, 1], 2: [0, 1], 3: [0, 1], 4: [1]}
    path.write_text(json.dumps(with_wrong_programs(programs2, wrong2, entry)))
    out["y2"] = run(root, "y2", "humaneval", "--model", "y2", "--load_generations_path", str(path), *common,
                    "--n_samples", "2")
    return root, out


def compare(root: Path, a: str, b: str) -> subprocess.CompletedProcess:
    return codeeval("compare", a, b, cwd=root)


def test_results_json_and_the_table_carry_the_standard_error(runs):
    root, out = runs
    results = json.loads((out["y"] / "results.json").read_text())
    assert results["humaneval"] == {"pass@1": 0.4}  # bigcode's shape, untouched
    task = results["codeeval"]["tasks"]["humaneval"]
    se = math.sqrt(0.4 * 0.6 / 9)  # by hand: 4 of 10 pass, sample sd / sqrt(10)
    assert task["stderr"]["pass@1"] == pytest.approx(se)
    assert task["ci95"]["pass@1"] == pytest.approx([0.4 - 1.959964 * se, 0.4 + 1.959964 * se], abs=1e-6)
    assert task["stderr_method"]["pass@1"] == "closed form over problems"
    metrics = json.loads((out["y"] / "humaneval" / "metrics.json").read_text())
    assert metrics["stderr"] == task["stderr"]
    done = codeeval("run", "--model", "y", "--load_generations_path", str(root / "y.json"), "--tasks", "humaneval",
                    "--limit", str(LIMIT), "--executor", "local", "--allow_code_execution", "--data-dir", str(DATA),
                    "--output-dir", str(out["y"]), cwd=root)
    assert done.returncode == 0 and "pass@1=0.4000 ± 0.1633" in done.stdout, done.stdout
    assert "pass@1 95% interval [0.0799, 0.7201] over 10 problems" in done.stdout


def test_reference_against_six_wrong_programs_mcnemar(runs):
    root, out = runs
    done = compare(root, "ref", "y")
    assert done.returncode == 0, done.stderr
    line = next(x for x in done.stdout.splitlines() if x.startswith("humaneval:"))
    # b = 6 pass->fail, c = 0: p = 2 / 2^6
    assert "pass@1 A 1.0000  B 0.4000  B-A -0.6000" in line and "p=0.03125 (McNemar's exact test, 10 problems" in line
    assert "pass->fail: 6 problems" in done.stdout and "fail->pass: 0 problems" in done.stdout
    for i in range(2, 8):
        assert (f"HumanEval/{i}: A ref/humaneval/executions/shard-00000.parquet sample 0; "
                f"B y/humaneval/executions/shard-00000.parquet sample 0") in done.stdout


def test_flips_both_ways_hand_checked(runs):
    root, out = runs
    [c], only_a, only_b = compare_runs(out["x"], out["y"])
    assert not only_a and not only_b
    assert c.test == MCNEMAR and c.problems == 10
    assert (c.a, c.b) == (pytest.approx(0.8), pytest.approx(0.4)) and c.difference == pytest.approx(-0.4)
    assert [f[0] for f in c.pass_to_fail] == [f"HumanEval/{i}" for i in range(2, 8)]
    assert [f[0] for f in c.fail_to_pass] == ["HumanEval/0", "HumanEval/1"]
    # b = 6, c = 2: 2 (C(8,0) + C(8,1) + C(8,2)) / 2^8 = 74 / 256
    assert c.p_value == pytest.approx(74 / 256) == mcnemar_exact(6, 2)
    # the mean per-problem difference (+1, +1, six -1, two 0) +- 1.96 sd / sqrt(10)
    sd = math.sqrt(sum((d + 0.4) ** 2 for d in [1, 1] + [-1] * 6 + [0, 0]) / 9)
    assert c.ci95 == pytest.approx((-0.4 - 1.959964 * sd / math.sqrt(10), -0.4 + 1.959964 * sd / math.sqrt(10)),
                                   abs=1e-5)
    # the rows named are those of the executions Parquet files
    rows = pq.read_table(out["y"] / "humaneval" / "executions" / "shard-00000.parquet").to_pylist()
    failed = sorted(r["task_id"] for r in rows if not r["passed"])
    assert failed == [f"HumanEval/{i}" for i in range(2, 8)]
    same = compare(root, "x", "x")
    assert "B-A +0.0000" in same.stdout and "p=1 (" in same.stdout and "pass->fail: 0 problems" in same.stdout


def test_several_samples_paired_bootstrap(runs):
    """n=2: pass@1 per problem is 0, 1/2 or 1, so the paired bootstrap; a flip is a problem
    solved by some sample in one run and by none in the other."""
    root, out = runs
    [c], _, _ = compare_runs(out["ref2"], out["y2"])
    assert c.test.startswith("paired bootstrap") and c.difference == pytest.approx(-4.5 / 10)
    assert c.ci95[0] < c.difference < c.ci95[1] < 0
    # centred draws at least 0.45 from -0.45: a sum of 10 draws >= 0 (0.5^10) or <= -9 (about 3 sd): p ~ 0.003
    assert 0 < c.p_value < 0.02
    assert [f[0] for f in c.pass_to_fail] == [f"HumanEval/{i}" for i in range(4)] and not c.fail_to_pass
    assert c.pass_to_fail[0][2].endswith("shard-00000.parquet sample 0, 1")
    assert compare_runs(out["ref2"], out["y2"])[0][0] == c  # the fixed seed


def test_different_problem_sets_are_refused_in_one_line(runs):
    root, _ = runs
    done = compare(root, "ref", "ref5")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == ("codeeval: error: humaneval: the runs hold different problem sets (10 problems in A, "
                           "5 in B; 5 only in A (first HumanEval/5)); not comparable\n")


def test_different_prompts_are_refused_in_one_line(runs, tmp_path):
    """A copy of the reference run whose problems.parquet has another prompt for HumanEval/3 (as
    a changed data set would write it)."""
    root, out = runs
    copy = tmp_path / "edited"
    shutil.copytree(out["ref"], copy)
    path = copy / "humaneval" / "problems.parquet"
    table = pq.read_table(path)
    prompts = table.column("prompt").to_pylist()
    prompts[3] = "# a different prompt\n" + prompts[3]
    pq.write_table(table.set_column(table.column_names.index("prompt"), "prompt", pa.array(prompts)), path)
    done = compare(root, "ref", str(copy))
    assert done.returncode == 2
    assert done.stderr.splitlines() == ["codeeval: error: humaneval: the prompts differ for 1 of 10 problems "
                                        "(first HumanEval/3); not comparable"]


def test_corpus_bleu_paired_bootstrap(tmp_path, data_dir):
    """CoNaLa scores BLEU over the corpus, no per-problem value: both runs rescored on the same
    draws of problems. Every third completion replaced by another problem's snippet."""
    a = run(tmp_path, "a", "conala", "--model", "reference", "--limit", "30", "--save_generations",
            "--save_generations_path", str(tmp_path / "g.json"))
    programs = json.loads((tmp_path / "g_conala.json").read_text())
    wrong = [[programs[(i + 7) % len(programs)][0]] if i % 3 == 0 else p for i, p in enumerate(programs)]
    (tmp_path / "w.json").write_text(json.dumps(wrong))
    b = run(tmp_path, "b", "conala", "--model", "w", "--load_generations_path", str(tmp_path / "w.json"),
            "--limit", "30")
    [c], _, _ = compare_runs(a, b)
    bleu_b = json.loads((b / "results.json").read_text())["conala"]["bleu"]
    assert c.metric == "bleu" and c.a == pytest.approx(1.0) and c.b == pytest.approx(bleu_b)
    assert c.test.startswith("paired bootstrap") and c.ci95[0] < c.difference < c.ci95[1] < 0
    assert c.p_value == pytest.approx(1 / 1001)  # no draw comes near 0: the smallest p of 1000 draws
    assert c.flips == "" and not c.pass_to_fail
    done = compare(tmp_path, "a", "b")
    assert "no pass/fail per problem: no flips listed" in done.stdout
    # the run's view: each hypothesis beside its reference, with its sentence BLEU
    _, viewed = site_data(b / "view")
    task = viewed["conala"]
    assert task["kind"] == "text" and task["score_label"].startswith("sentence BLEU")
    hypotheses = [r["completion"] for r in task["runs"][0]]
    assert hypotheses == [p[0] for p in wrong]
    scores = [r["score"] for r in task["runs"][0]]
    references = [p["reference"] for p in task["problems"]]
    assert all(s == 1.0 for s, h, ref in zip(scores, hypotheses, references) if h == ref)
    assert all(s < 1.0 for i, s in enumerate(scores) if i % 3 == 0) and references[0] == programs[0][0]


def test_repo_level_runs_compare_after_their_project_tree_is_gone(tmp_path, data_dir):
    """DevEval: pass@1 is the headline; recall@k, which reads the project's files, is not
    recomputed, so two runs still compare once the extracted Source_Code in the cache is gone."""
    cache = tmp_path / "cache"
    env = {"CODEEVAL_CACHE": str(cache)}
    common = ("--limit", "2", "--executor", "docker")
    a = run(tmp_path, "a", "deveval", "--model", "reference", *common, "--save_generations",
            "--save_generations_path", str(tmp_path / "g.json"), env=env)
    programs = json.loads((tmp_path / "g_deveval.json").read_text())
    (tmp_path / "w.json").write_text(json.dumps([programs[0], ["    return None\n"]]))
    b = run(tmp_path, "b", "deveval", "--model", "w", "--load_generations_path", str(tmp_path / "w.json"), *common,
            env=env)
    shutil.rmtree(cache)
    done = compare(tmp_path, str(a), str(b))
    assert done.returncode == 0, done.stderr[-3000:]
    assert "deveval: pass@1 A 1.0000  B 0.5000  B-A -0.5000" in done.stdout and "pass->fail: 1 problems" in done.stdout
    # the view of the pair: the patched function of each side and the failing tests by name
    viewed = codeeval("view", str(a), str(b), cwd=tmp_path)
    assert viewed.returncode == 0, viewed.stderr
    _, tasks = site_data(Path(viewed.stdout.split("view: ", 1)[1].strip()).parent)
    task = tasks["deveval"]
    problem, (ok, wrong) = task["problems"][1], (task["runs"][0][1], task["runs"][1][1])
    assert ok["passed"] is True and wrong["passed"] is False and wrong["completion"].endswith("return None\n")
    assert problem["test_names"] and all("::" in name or "test" in name.lower() for name in problem["test_names"])
    assert ok["failing"] is None and wrong["failing"] and set(wrong["failing"]) <= set(problem["test_names"])
    assert all(f"FAILED {name}" in wrong["stdout"] for name in wrong["failing"])

