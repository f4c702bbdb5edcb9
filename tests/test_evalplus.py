"""HumanEval+ / MBPP+: the EvalPlus releases, per-input verdicts from real runs in the Docker
sandbox (right, wrong on one plus input, slow on one input, raising, floats within and beyond
atol, special oracles), the expected-output cache, and bigcode's one-program mode."""
from __future__ import annotations

import pytest
from docker_env import ensure_images

from codeeval.benchmarks.evalplus import judge as evalplus_judge
from codeeval.benchmarks.evalplus.mbppplus_inputs import deserialize
from codeeval.benchmarks.registry import get_task
from codeeval.benchmarks.spec import LoadOptions
from codeeval.executors.docker.sandbox import DockerSandbox
from codeeval.pipeline.execute import execute_rows, verdict_of

PASS, WRONG, RAISED, TIMED_OUT, NOT_RUN = 1, 0, -1, -2, -3


@pytest.fixture(scope="module")
def sandbox():
    ensure_images()
    with DockerSandbox(n_workers=2) as box:
        yield box


@pytest.fixture(scope="module")
def problems(data_dir):
    load = LoadOptions(data_dir)
    return {p.task_id: p for name in ("humanevalplus", "mbppplus") for p in get_task(name).load(load)}


def judge(name, problem, completions, sandbox):
    task = get_task(name)
    rows = [{"task_id": problem.task_id, "sample": i, "completion": c} for i, c in enumerate(completions)]
    return [verdict_of(r) for r in execute_rows(task, [problem], rows, sandbox)]


def special_case(problem, inp, body):
    """The canonical solution, except on one input, where `body` runs instead."""
    r = problem.record
    name = r["entry_point"]
    return (r["prompt"] + r["canonical_solution"] + f"\n_canonical = {name}\n"
            f"def {name}(*args):\n    if list(args) == {inp!r}:\n{body}\n    return _canonical(*args)\n")


def test_the_releases_load_with_bigcodes_prompts(problems, data_dir):
    he, mb = problems["HumanEval/0"], problems["Mbpp/2"]
    assert he.prompt == he.record["prompt"].strip() and mb.prompt == mb.record["prompt"]
    assert len([t for t in problems if t.startswith("HumanEval/")]) == 164
    assert len([t for t in problems if t.startswith("Mbpp/")]) == 378
    mini = {p.task_id: p for p in get_task("humanevalplus-mini").load(LoadOptions(data_dir))}
    assert len(mini["HumanEval/0"].record["plus_input"]) < len(he.record["plus_input"])
    assert problems["HumanEval/32"].record["special"] == "find_zero"
    assert mb.record["special"] == "set_eq" and problems["Mbpp/737"].record["special"] == "not_none"
    # MBPP+ inputs as evalplus passes them: JSON lists become tuples, sets, complex numbers
    assert deserialize("Mbpp/2", [[[3, 4], [5, 4]]]) == [[(3, 4), (5, 4)]]
    assert deserialize("Mbpp/124", [[1, "1+2j"]]) == [(1.0, 1 + 2j)]
    assert deserialize("Mbpp/580", [[[1, [2, 3]]]]) == [((1, (2, 3)),)]
    assert deserialize("Mbpp/11", [["hello", "l"]]) == [["hello", "l"]]


def test_per_input_verdicts(problems, sandbox):
    p = problems["HumanEval/0"]
    n_base, n_plus = len(p.record["base_input"]), len(p.record["plus_input"])
    plus3, plus1, base2 = p.record["plus_input"][3], p.record["plus_input"][1], p.record["base_input"][2]
    right, wrong, slow, raises = judge("humanevalplus", p, [
        p.record["prompt"] + p.record["canonical_solution"],
        special_case(p, plus3, "        return not _canonical(*args)"),
        special_case(p, plus1, "        while True:\n            pass"),
        special_case(p, base2, "        raise ValueError('no')"),
    ], sandbox)
    assert right.passed and right.subsets == {"base": True, "plus": True}
    assert right.tests == (PASS,) * (n_base + n_plus)
    assert not wrong.passed and wrong.subsets == {"base": True, "plus": False} and wrong.status == "failed"
    assert wrong.tests == (PASS,) * n_base + (PASS,) * 3 + (WRONG,) + (NOT_RUN,) * (n_plus - 4)
    assert "plus fail" in wrong.detail
    # a slow input fails at its own limit (max(4 s, 4 x the canonical's CPU time))
    assert slow.subsets == {"base": True, "plus": False}
    assert slow.tests[n_base:n_base + 3] == (PASS, TIMED_OUT, NOT_RUN)
    # a failing base input fails the plus verdict too; the plus group still runs (EvalPlus runs both)
    assert raises.subsets == {"base": False, "plus": False}
    assert raises.tests[:4] == (PASS, PASS, RAISED, NOT_RUN) and set(raises.tests[n_base:]) == {PASS}


def test_floats_within_and_beyond_atol(problems, sandbox):
    p = problems["HumanEval/2"]  # truncate_number: float outputs, atol 0 -> 1e-6
    body = p.record["prompt"] + "    return number - int(number) + {}\n"
    within, beyond = judge("humanevalplus", p, [body.format("5e-7"), body.format("1e-4")], sandbox)
    assert within.passed
    assert not beyond.passed and beyond.tests[0] == WRONG


def test_special_oracles(problems, sandbox):
    mb = problems["Mbpp/2"]  # similar_elements: compared as sets
    [shuffled] = judge("mbppplus", mb, [
        "def similar_elements(a, b):\n    return tuple(sorted(set(a) & set(b), reverse=True))\n"], sandbox)
    assert shuffled.passed
    fz = problems["HumanEval/32"]  # find_zero: |poly(xs, x)| <= atol, not equality with the canonical root
    [unequal] = judge("humanevalplus", fz, [
        fz.record["prompt"] + fz.record["canonical_solution"] + "\n_f = find_zero\n"
        "class Root(float):\n    def __eq__(self, other):\n        return False\n    __hash__ = float.__hash__\n"
        "def find_zero(xs):\n    return Root(_f(xs))\n"], sandbox)
    assert unequal.passed  # the same root, never equal to the expected one: only the oracle can pass it


def test_expected_outputs_are_cached_by_data_digest(problems, sandbox, tmp_path, monkeypatch):
    monkeypatch.setenv("CODEEVAL_CACHE", str(tmp_path))
    p = problems["HumanEval/15"]  # its outputs pickle to 147 MB: the large ones are recomputed in the check
    [first] = judge("humanevalplus", p, [p.record["prompt"] + p.record["canonical_solution"]], sandbox)
    cached = list(tmp_path.rglob("*"))
    files = [f for f in cached if f.is_file()]
    assert first.passed and len(files) == 1 and files[0].name == evalplus_judge.truth_key(p)
    assert files[0].stat().st_size < 32 * 1024 * 1024
    [again] = judge("humanevalplus", p, [p.record["prompt"] + "    return ' '.join(map(str, range(n)))\n"], sandbox)
    assert not again.passed and list(tmp_path.rglob("*")) == cached


def test_bigcode_mode_is_one_program(problems, sandbox):
    p = problems["HumanEval/0"]
    plus3 = p.record["plus_input"][3]
    right, wrong = judge("humanevalplus-bigcode", p, [
        p.record["prompt"] + p.record["canonical_solution"],
        special_case(p, plus3, "        return not _canonical(*args)")], sandbox)
    assert right.passed and right.tests == () and right.subsets == {}
    assert not wrong.passed and wrong.status == "failed" and wrong.detail == "exit code 1"
