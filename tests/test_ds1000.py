"""DS-1000: both upstream formats read from disk (no downloads), bigcode's prompts and
post-processing, samples executed in the DS-1000 image (built here on demand, as `make
images-ds1000` does), and bigcode's mean pass@1.

Fixtures: tests/fixtures/ds1000 (invented problems, five per library, written by its
make_fixtures.py in the 2022 folder format and in xlang-ai's jsonl format). The reference
solutions of every library, TensorFlow's included, pass in both formats.
"""
from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from docker_env import REPO

from codeeval.benchmarks import ds1000
from codeeval.benchmarks.registry import get_task
from codeeval.benchmarks.spec import LoadOptions, Problem, Sample, Verdict
from codeeval.core.errors import UsageError
from codeeval.executors.docker.images import ds1000_image
from codeeval.executors.docker.sandbox import DockerSandbox
from codeeval.pipeline.execute import execute_rows, verdict_of

FIXTURES = Path(__file__).parent / "fixtures"
LIBS = ("Pandas", "Numpy", "Matplotlib", "Tensorflow", "Scipy", "Sklearn", "Pytorch")


@pytest.fixture(scope="module")
def new_dir(tmp_path_factory) -> Path:
    """A data dir holding only the current-format file."""
    root = tmp_path_factory.mktemp("ds1000-new")
    (root / "ds1000").mkdir()
    shutil.copy(FIXTURES / "ds1000" / "ds1000.jsonl", root / "ds1000" / "ds1000.jsonl")
    return root


def load(name, data_dir=FIXTURES):
    return get_task(name).load(LoadOptions(Path(data_dir)))


@pytest.fixture(scope="module")
def sandbox():
    done = subprocess.run(["bash", "codeeval/containers/ds1000/build.sh"], cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 0, f"codeeval/containers/ds1000/build.sh failed:\n{done.stdout}\n{done.stderr}"
    with DockerSandbox(n_workers=2, image=ds1000_image()) as box:
        yield box


def test_both_formats_load_the_same_problems(new_dir):
    old, new = load("ds1000-all-completion"), load("ds1000-all-completion", new_dir)
    assert [p.record["lib"] for p in old] == [lib for lib in LIBS for _ in range(5)]
    assert [(p.task_id, p.prompt, p.record["reference_code"].strip()) for p in old] == \
        [(p.task_id, p.prompt, p.record["reference_code"].strip()) for p in new]
    assert old[0].task_id == "DS1000/Pandas/Completion/q0" and old[0].record["format"] == "2022"
    assert {p.record["format"] for p in new} == {"2024"}
    assert [p.task_id for p in load("ds1000-numpy-completion")] == [f"DS1000/Numpy/Completion/q{i}" for i in range(5)]
    insertion = load("ds1000-all-insertion")  # Matplotlib has no insertion problems: left out
    assert len(insertion) == 30 and "Matplotlib" not in {p.record["lib"] for p in insertion}
    assert [p.task_id for p in load("ds1000-matplotlib-insertion")][0] == "DS1000/Matplotlib/Completion/q0"
    files = old[5].record["files"]  # Numpy q0: the whole folder travels with the problem
    assert {"ans/ans1.pkl", "ans/ans2.pkl", "input/input1.pkl", "code_context.txt", "test_code.py", ".cfg"} <= set(files)


def test_bad_data_fails_with_one_line(tmp_path, new_dir):
    with pytest.raises(UsageError, match="no DS-1000 data"):
        load("ds1000-numpy-completion", tmp_path)
    with pytest.raises(UsageError, match="insertion prompts exist only in the 2022 format"):
        load("ds1000-numpy-insertion", new_dir)
    (tmp_path / "ds1000").mkdir()
    (tmp_path / "ds1000" / "ds1000.jsonl").write_text(json.dumps({"prompt": "p"}) + "\n")
    with pytest.raises(UsageError, match="DS-1000 record 0 is malformed"):
        load("ds1000-numpy-completion", tmp_path)
    broken = tmp_path / "old" / "ds1000_data" / "Numpy" / "Completion" / "q0"
    shutil.copytree(FIXTURES / "ds1000" / "ds1000_data" / "Numpy" / "Completion" / "q0", broken)
    (broken / "code_context.txt").write_text("print(1)\n")
    with pytest.raises(UsageError, match="has no \\[insert\\]"):
        load("ds1000-numpy-completion", tmp_path / "old")
    with pytest.raises(UsageError, match="unknown task"):
        get_task("ds1000-keras-completion")


def test_prompts_and_postprocessing_are_bigcodes():
    numpy = load("ds1000-numpy-completion")[0]
    assert numpy.prompt.endswith("result = ... # put solution in this variable\nBEGIN SOLUTION\n<code>\n")
    assert ds1000.postprocess_completion(numpy, "  result = a * 2\n</code>\nEND SOLUTION", ("<eos>",)) == \
        "result = a * 2"
    assert ds1000.postprocess_completion(numpy, "x = 1<eos>\n</code>") == "x = 1<eos>"  # eos only when given
    assert ds1000.postprocess_completion(numpy, "x = 1<eos>\n</code>", ("<eos>",)) == "x = 1"
    plot = load("ds1000-matplotlib-completion")[0]
    assert plot.prompt.endswith("# SOLUTION START\n")
    assert ds1000.postprocess_completion(plot, "plt.plot(x, y)\n# SOLUTION END\nmore") == "plt.plot(x, y)"
    task = get_task("ds1000-numpy-insertion")
    problem = task.load(LoadOptions(FIXTURES))[0]
    prefix, suffix = task.prompting.fim_parts(problem)
    assert prefix.endswith("BEGIN SOLUTION\n<code>\n") and suffix == "\n</code>\nEND SOLUTION\n<code>\nprint(result)\n</code>\n"
    assert task.postprocess(problem, "    result = a * 2\n</code>") == "result = a * 2"  # strip: no prompt split
    assert task.stop_words == ("</code>", "# SOLUTION END") and task.execution.runtime == "ds1000"


def test_mean_pass_at_1_overall_and_per_library():
    problems = [Problem(f"p{i}", i, "", {"lib": lib}) for i, lib in enumerate(["Numpy", "Numpy", "Pandas"])]
    samples = [Sample(p.task_id, s, "", Verdict("x", ok)) for p, oks in zip(problems, [(1, 1), (1, 0), (0, 0)])
               for s, ok in enumerate(oks)]
    metric = get_task("ds1000-all-completion").metrics[0]
    assert metric.compute(problems, samples, []) == {
        "pass@1": 0.5, "mean pass@1 accuracy (2 samples)": 0.5, "pass@1/Numpy": 0.75, "pass@1/Pandas": 0.0}


def run(task, problem, completions, sandbox):
    rows = [{"task_id": problem.task_id, "sample": i, "completion": c} for i, c in enumerate(completions)]
    return [verdict_of(r) for r in execute_rows(task, [problem], rows, sandbox)]


def test_current_format_oracle_passes_every_problem(new_dir, sandbox):
    task = get_task("ds1000-all-completion")
    problems = task.load(LoadOptions(new_dir))
    rows = [{"task_id": p.task_id, "sample": 0, "completion": task.reference_solution(p)} for p in problems]
    executed = execute_rows(task, problems, rows, sandbox)
    assert len(executed) == 35 and [r["task_id"] for r in executed if not r["passed"]] == []
    tf_task = get_task("ds1000-tensorflow-completion")  # a wrong TensorFlow answer still fails
    tf_problem = tf_task.load(LoadOptions(new_dir))[0]
    assert [v.passed for v in run(tf_task, tf_problem, ["result = tf.reduce_sum(t) + 1",
                                                        tf_task.reference_solution(tf_problem)], sandbox)] == [False, True]
    numpy = [p for p in problems if p.record["lib"] == "Numpy"]
    verdicts = run(task, numpy[0], ["result = a * 3", "result = a * 2\nimport sys\nsys.exit(0)", "result = a + a"],
                   sandbox)
    assert [v.passed for v in verdicts] == [False, False, True]
    loops = run(task, numpy[3], ["result = np.array([a[:, j].mean() for j in range(a.shape[1])])"], sandbox)
    assert loops[0].passed is False  # right values, but test_string forbids the loop


def test_2022_harness_verdicts(sandbox):
    task = get_task("ds1000-numpy-completion")
    numpy = task.load(LoadOptions(FIXTURES))
    verdicts = run(task, numpy[0], [
        "result = a * 2", "result = a * 3", "raise ValueError('no')", "x = a * 2",  # no result: fails
        "result = a * 2\nimport sys\nsys.exit(3)",  # exit codes are ignored: the pickle was not written
        "result = a * 2\nimport atexit\natexit.register(lambda: print('bye'))",  # fine
    ], sandbox)
    assert [v.passed for v in verdicts] == [True, False, False, False, False, True]
    assert verdicts[0].tests == (1, 1) and verdicts[1].tests == (0,)  # stops at the first failing case
    loops = run(task, numpy[3], ["result = np.array([a[:, j].mean() for j in range(a.shape[1])])",
                                 "print(a)\nresult = a.mean(axis=0)"], sandbox)
    assert [v.passed for v in loops] == [False, True]  # stringTest; print lines dropped before it
    plot_task = get_task("ds1000-matplotlib-completion")
    plot = plot_task.load(LoadOptions(FIXTURES))[0]
    verdicts = run(plot_task, plot, ["plt.plot(x, y)\nplt.title('hello')\nplt.show()\nplt.close()",
                                     "plt.plot(x, y)\nplt.title('bye')"], sandbox)
    assert [v.passed for v in verdicts] == [True, False]  # plt.close() and plt.show() lines are dropped
    insert_task = get_task("ds1000-pytorch-insertion")  # the Insertion folders' own files and pickles
    torch_problems = insert_task.load(LoadOptions(FIXTURES))[:2]
    rows = [{"task_id": p.task_id, "sample": 0, "completion": insert_task.reference_solution(p)}
            for p in torch_problems]
    assert [r["task_id"] for r in execute_rows(insert_task, torch_problems, rows, sandbox) if r["passed"]] == \
        ["DS1000/Pytorch/Insertion/q0", "DS1000/Pytorch/Insertion/q1"]
    tf_task = get_task("ds1000-tensorflow-insertion")  # TensorFlow's answers are pickled tensors
    tf_problem = tf_task.load(LoadOptions(FIXTURES))[1]
    assert [v.passed for v in run(tf_task, tf_problem, [tf_task.reference_solution(tf_problem), "result = t"],
                                  sandbox)] == [True, False]


def test_flow_reference_oracle_on_the_2022_format(prefect_api, sandbox, tmp_path, capsys):
    from codeeval.cli import main

    assert main(["run", "--model", "reference", "--tasks", "ds1000-all-completion", "--allow_code_execution",
                 "--data-dir", str(FIXTURES), "--output-dir", str(tmp_path)]) == 0
    capsys.readouterr()
    results = json.loads((tmp_path / "results.json").read_text())["ds1000-all-completion"]
    assert results["pass@1"] == 1.0 and results["mean pass@1 accuracy (1 samples)"] == 1.0
    assert {k: v for k, v in results.items() if k.startswith("pass@1/")} == {f"pass@1/{lib}": 1.0 for lib in LIBS}
