"""APPS: loaders for the upstream layouts (no hub), bigcode's prompts and post-processing,
apps_metric's per-test verdicts reproduced in the Docker sandbox, and its metrics.

Fixtures: tests/fixtures/apps/test.jsonl, invented problems in the codeparrot/apps row format
(both call types in each level; ids ordered as upstream: interview, competition, introductory).
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from docker_env import ensure_images, unstretched

from codeeval.benchmarks import apps
from codeeval.benchmarks.registry import get_task
from codeeval.benchmarks.spec import LoadOptions, Sample, Verdict
from codeeval.core.errors import UsageError
from codeeval.executors.docker.sandbox import DockerSandbox
from codeeval.pipeline.execute import execute_rows, verdict_of

FIXTURES = Path(__file__).parent / "fixtures"
ROWS = [json.loads(line) for line in (FIXTURES / "apps" / "test.jsonl").read_text().splitlines()]


def load(name, data_dir=FIXTURES):
    return get_task(name).load(LoadOptions(Path(data_dir)))


@pytest.fixture(scope="module")
def sandbox():
    ensure_images()
    with DockerSandbox(n_workers=2, limits=unstretched()) as box:  # the 11 s, not a slow host's stretch
        yield box


def test_levels_keep_the_file_order_and_ids():
    assert [p.task_id for p in load("apps-interview")] == ["APPS/0", "APPS/1", "APPS/2"]
    assert [p.task_id for p in load("apps-competition")] == ["APPS/3000", "APPS/3001", "APPS/3002"]
    intro = load("apps-introductory")
    assert [p.index for p in intro] == [0, 1, 2] and intro[0].record["problem_id"] == 4000


def write_hendrycks_folders(root: Path) -> None:
    """hendrycks/apps's tarball layout: test/<NNNN>/{question.txt, solutions.json, ...}."""
    for row in ROWS:
        folder = root / "test" / f"{row['id']:04d}"
        folder.mkdir(parents=True)
        (folder / "question.txt").write_text(row["question"])
        (folder / "solutions.json").write_text(row["solutions"])
        (folder / "input_output.json").write_text(row["input_output"])
        (folder / "metadata.json").write_text(json.dumps({"difficulty": row["difficulty"], "url": row["url"]}))
        if row["starter_code"]:
            (folder / "starter_code.py").write_text(row["starter_code"])


def test_every_upstream_layout_loads_the_same_records(tmp_path):
    import datasets

    expected = [(p.task_id, p.prompt, p.record["input_output"], p.record["solutions"]) for p in load("apps-interview")]
    write_hendrycks_folders(tmp_path / "folders" / "apps")
    rows = [dict(r, problem_id=r["id"]) for r in ROWS]
    for r in rows:
        del r["id"]
    datasets.DatasetDict({"test": datasets.Dataset.from_list(rows)}).save_to_disk(str(tmp_path / "disk" / "apps"))
    datasets.Dataset.from_list(rows).save_to_disk(str(tmp_path / "split" / "test"))
    for layout in ("folders", "disk", "split"):
        got = [(p.task_id, p.prompt, p.record["input_output"], p.record["solutions"])
               for p in load("apps-interview", tmp_path / layout)]
        assert got == expected, layout


def test_bad_data_fails_with_one_line(tmp_path):
    with pytest.raises(UsageError, match="no APPS data"):
        load("apps-interview", tmp_path)
    (tmp_path / "apps").mkdir()
    (tmp_path / "apps" / "test.jsonl").write_text(json.dumps(dict(ROWS[0], input_output="")) + "\n")
    with pytest.raises(UsageError, match="APPS problem 0: input_output"):  # --strict-data: today's error
        get_task("apps-interview").load(LoadOptions(tmp_path, strict_data=True))
    (tmp_path / "apps" / "test.jsonl").write_text(json.dumps({"id": 1, "question": "q"}) + "\n")
    with pytest.raises(UsageError, match="malformed: no solutions"):
        load("apps-interview", tmp_path)
    shutil.rmtree(tmp_path / "apps")
    (tmp_path / "apps").mkdir()
    (tmp_path / "apps" / "test.jsonl").write_text(json.dumps(ROWS[0]) + "\n")
    with pytest.raises(UsageError, match="no competition problems"):
        load("apps-competition", tmp_path)
    with pytest.raises(UsageError, match="unknown task"):
        get_task("apps-easy")


def test_prompts_are_bigcodes():
    intro = load("apps-introductory")
    assert intro[0].prompt == ("\nQUESTION:\nRead two integers and print their sum.\n"
                               "\nUse Standard Input format\nANSWER:\n")
    assert intro[1].prompt == ("\nQUESTION:\nAdd one to every element of a list.\ndef add_one(xs):\n\t"
                               "\nUse Call-Based format\nANSWER:\n")
    shot = load("apps-introductory-fewshot")[1].prompt
    assert shot.startswith("Implement answers to the following questions:\nQUESTION:\nFor an integer x")
    assert shot.count("\nANSWER:\n") == 3 and shot.endswith(intro[1].prompt)
    assert "\nUse Call-Based format\nANSWER:\nclass Solution:\n     def numTrees(self, n):" in shot


def test_postprocess_takes_the_text_after_the_first_answer_mark():
    p, shot = load("apps-introductory")[0], load("apps-introductory-fewshot")[0]
    assert apps.postprocess(p, "print(1)\nQUESTION:\nmore") == "\nprint(1)\nQUESTION:\nmore"  # no stop-word cut
    assert apps.postprocess(shot, "print(1)") == "\nprint(1)"  # the examples' marks do not count
    assert get_task("apps-interview").stop_words == ("\nQUESTION", "\n---", "\nANSWER")


def run(task_name, problem, completions, sandbox):
    task = get_task(task_name)
    rows = [{"task_id": problem.task_id, "sample": i, "completion": c} for i, c in enumerate(completions)]
    executed = execute_rows(task, [problem], rows, sandbox)
    return [verdict_of(r) for r in executed]


def test_reference_solutions_pass_every_test(sandbox):
    for level in apps.LEVELS:
        task = get_task(f"apps-{level}")
        problems = task.load(LoadOptions(FIXTURES))
        rows = [{"task_id": p.task_id, "sample": 0, "completion": task.reference_solution(p)} for p in problems]
        for problem, row in zip(problems, execute_rows(task, problems, rows, sandbox)):
            assert row["passed"] and set(row["tests"]) == {1} and len(row["tests"]) == apps.n_tests(problem), row


def test_standard_input_verdicts(sandbox):
    problem = load("apps-introductory")[0]  # a + b, three tests: 3, 10, 0
    completions = [
        "a, b = map(int, input().split())\nprint('  ', a + b, '  ')\nprint()\n",  # stripped compare
        "a, b = map(int, input().split())\nprint(float(a + b))\n",  # numbers compared as floats
        "a, b = map(int, input().split())\nprint(a + b, 0)\n",  # token sets: only "0 0" == {"0"}
        "a, b = map(int, input().split())\nprint(a - b)\n",
        "raise ValueError('no')\n",  # every test -1
        "def f(:\n  pass\n",  # does not compile: a single -2
        "import sys\nsys.exit()\n",  # SystemExit is swallowed: empty output, wrong
        "exit()\n",  # the guard made exit None: -1
        "def main():\n    print(sum(map(int, input().split())))\nif __name__ == '__main__':\n    main()\n",
        "import os\nprint(3)\nos._exit(0)\n",  # the harness dies: every test -1
        "while True:\n    pass\n",  # 4 s per test, 11 s in all (CPU): every test -1
    ]
    verdicts = run("apps-introductory", problem, completions, sandbox)
    assert [v.tests for v in verdicts] == [
        (1, 1, 1), (1, 1, 1), (0, 0, 1), (0, 0, 0), (-1, -1, -1), (-2,), (0, 0, 0), (-1, -1, -1), (0, 0, 0),
        (-1, -1, -1), (-1, -1, -1)]
    assert [v.passed for v in verdicts] == [True, True] + [False] * 9
    # the loop's three 4 s tests (12 s) pass the sample's 11 s only just: where the host's speed
    # check stretches the sample's limit (cputime.slowdown, a crowded machine), the harness ends
    # first and reports its three -1s itself. The verdict is the same either way.
    assert verdicts[-1].status in ("timeout", "failed") and verdicts[9].status == "failed"


def test_call_based_verdicts(sandbox):
    add_one = load("apps-introductory")[1]
    verdicts = run("apps-introductory", add_one, [
        "def add_one(xs):\n    return tuple(x + 1 for x in xs)\n",  # a tuple counts as a list
        "class Solution:\n    def add_one(self, xs):\n        return [x + 1 for x in xs]\n",
        "def add_one(xs):\n    return [x + 2 for x in xs]\n",
        "def add_two(xs):\n    return xs\n",  # no such function: -2
        "def add_one(xs):\n    return np.array(xs) + 1\n",  # ambiguous truth value on 2 elements: -1
        "import sys\nsys.exit(0)\n",  # SystemExit while loading: the harness dies, every test -1
        "def add_one(xs):\n    while True:\n        pass\n",  # 4 s per test: -1 each
    ], sandbox)
    assert [v.tests for v in verdicts] == [(1, 1), (1, 1), (0, 0), (-2,), (-1, 1), (-1, -1), (-1, -1)]
    key_sum = load("apps-competition")[1]  # JSON's string keys become ints, as in apps_metric
    verdicts = run("apps-competition", key_sum, ["def key_sum(d):\n    return sum(d)\n",
                                                 "def key_sum(d):\n    return ''.join(d.values())\n"], sandbox)
    assert [v.tests for v in verdicts] == [(1, 1), (0, 0)]


def samples(results):
    """Samples with the given per-test results: {task_id: [results of each sample]}."""
    return [Sample(t, i, "", Verdict("x", apps.all_passed(r), tuple(r))) for t, rs in results.items()
            for i, r in enumerate(rs)]


def test_metrics_match_apps_metric_examples():
    """apps_metric's own get_results doctests, computed by hand there."""
    problems = load("apps-interview") + load("apps-competition")[:2]
    ids = [p.task_id for p in problems]
    metric = get_task("apps-interview").metrics[0]
    single = dict(zip(ids, [[[-2]], [[0, 0]], [[1, 1]], [[0, 1, 0, 1]], [[-1, -1]]]))
    assert metric.compute(problems, samples(single), [1]) == {"avg_accuracy": pytest.approx(0.3),
                                                              "strict_accuracy": pytest.approx(0.2)}
    multiple = dict(zip(ids, [[[-2], [1, 1, 1]], [[-1, -1, -1], [1, 0, 1]]]))
    assert metric.compute(problems[:2], samples(multiple), [1, 2]) == {"pass@1": 0.25, "pass@2": 0.5}
    assert get_task("apps-interview").default_ks == (1, 2, 3, 5, 10, 100)


def cli_run(capsys, tmp_path, *args) -> dict:
    from codeeval.cli import main

    assert main(["run", *args, "--allow_code_execution", "--data-dir", str(FIXTURES),
                 "--output-dir", str(tmp_path)]) == 0
    capsys.readouterr()
    return json.loads((tmp_path / "results.json").read_text())


def test_flow_reference_oracle_and_replayed_generations(prefect_api, tmp_path, capsys):
    """Through the CLI, Prefect and the sandbox: every reference solution passes every test;
    saved generations (bigcode's format, used as post-processed) give the hand-computed values."""
    names = [f"apps-{level}" for level in apps.LEVELS]
    results = cli_run(capsys, tmp_path / "ref", "--model", "reference", "--tasks", ",".join(names))
    for name in names:
        assert results[name] == {"avg_accuracy": 1.0, "strict_accuracy": 1.0}
        assert results["codeeval"]["tasks"][name]["primary"] == "strict_accuracy"
    saved = tmp_path / "generations.json"
    saved.write_text(json.dumps([
        ["a, b = map(int, input().split())\nprint(a + b, 0)\n"],  # tests 0 0 1: 1/3
        ["def add_one(xs):\n    return tuple(x + 1 for x in xs)\n"],  # 1 1: 1
        ["print(1.5)\n"],  # 0 1: 1/2
    ]))
    results = cli_run(capsys, tmp_path / "replay", "--tasks", "apps-introductory", "--load_generations_path",
                      str(saved))
    assert results["apps-introductory"] == {"avg_accuracy": pytest.approx((1 / 3 + 1 + 1 / 2) / 3),
                                            "strict_accuracy": pytest.approx(1 / 3)}


def test_empty_input_output_scores_as_a_compile_error(prefect_api, tmp_path, capsys):
    """apps_metric scores a problem whose input_output does not parse as a compile error (-2) and
    goes on; so do we (counted and named in results.json), and --strict-data stops instead."""
    from codeeval.cli import main

    rows = [dict(r, input_output="") if r["difficulty"] == "introductory" and i == 0 else r
            for i, r in enumerate(r for r in ROWS if r["difficulty"] == "introductory")]
    bad_id = rows[0].get("problem_id", rows[0].get("id"))
    (tmp_path / "data" / "apps").mkdir(parents=True)
    (tmp_path / "data" / "apps" / "test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    args = ["run", "--model", "reference", "--tasks", "apps-introductory", "--allow_code_execution",
            "--data-dir", str(tmp_path / "data"), "--output-dir", str(tmp_path / "run")]
    assert main(args) == 0
    err = capsys.readouterr().err
    warned = [ln for ln in err.splitlines() if "malformed input_output" in ln]
    assert len(warned) == 1 and str(bad_id) in warned[0], err
    result = json.loads((tmp_path / "run" / "results.json").read_text())["apps-introductory"]
    assert result["malformed_problems"] == 1 and result["malformed_problem_ids"] == [f"APPS/{bad_id}"]
    n = len(rows)  # every other reference solution passes; the malformed problem's one result is -2
    assert result["strict_accuracy"] == pytest.approx((n - 1) / n) and result["avg_accuracy"] == pytest.approx((n - 1) / n)
    assert main([*args[:-1], str(tmp_path / "strict"), "--strict-data"]) == 2
    assert f"APPS problem {bad_id}: input_output" in capsys.readouterr().err
