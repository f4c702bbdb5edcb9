"""ruHumanEval (MERA) on fixtures in MERA's record format (tests/fixtures/ruhumaneval/
public_test.jsonl: invented problems, the public set is on the HF hub only): prompts, stop
strings and fence unwrapping, per-test outputs from real runs in the Docker sandbox compared
as MERA compares them, the two execution modes side by side, and MERA's pass@k."""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
from docker_env import ensure_images

from codeeval.benchmarks import ruhumaneval
from codeeval.benchmarks.registry import get_task
from codeeval.benchmarks.spec import LoadOptions, Sample, Verdict
from codeeval.core.errors import UsageError
from codeeval.executors.docker.sandbox import DockerSandbox
from codeeval.pipeline.execute import execute_rows, verdict_of

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture(scope="module")
def problems():
    return get_task("ruhumaneval").load(LoadOptions(FIXTURES))


@pytest.fixture(scope="module")
def sandbox():
    ensure_images()
    with DockerSandbox(n_workers=2) as box:
        yield box


def by_entry(problems, entry):
    return next(p for p in problems if p.record["meta"]["entry_point"] == entry)


def run(task_name, problem, completions, sandbox, **limits):
    """Verdicts from real runs; `limits` shrink the limits (exec_limit_s, timeout_s) so that
    the overrun cases need little CPU on a loaded machine."""
    task = get_task(task_name)
    if limits:
        task = dataclasses.replace(task, execution=dataclasses.replace(task.execution, **limits))
    rows = [{"task_id": problem.task_id, "sample": i, "completion": c} for i, c in enumerate(completions)]
    return [verdict_of(r) for r in execute_rows(task, [problem], rows, sandbox)]


def test_records_and_prompts_in_meras_format(problems):
    assert [p.task_id for p in problems] == [f"ruHumanEval/{i}" for i in range(6)]
    first = json.loads((FIXTURES / "ruhumaneval" / "public_test.jsonl").read_text().splitlines()[0])
    assert isinstance(first["inputs"]["tests"], str) and problems[0].record == first
    assert problems[0].prompt == first["instruction"].format(**first["inputs"]).strip()
    assert problems[0].prompt.startswith("На вход подается") and problems[0].prompt.endswith('    """')
    fib = by_entry(problems, "fib")  # outputs in the 2-D form: 10 identical rows
    assert len(fib.record["outputs"]) == 10 and ruhumaneval.expected_outputs(fib.record) == ["0", "1", "55", "610"]
    assert ruhumaneval.test_cases(fib.record) == [{"n": 0}, {"n": 1}, {"n": 10}, {"n": 15}]
    assert get_task("ruhumaneval").default_ks == (1, 5, 10)


def test_postprocess_cuts_at_meras_stops_and_unwraps_a_fence(problems):
    p = problems[0]
    function = p.record["inputs"]["function"]
    assert ruhumaneval.postprocess(p, "    return x + 1\n\nprint(inc(1))") == function + "    return x + 1\n"
    assert ruhumaneval.postprocess(p, "    return x + 1\n# done\ndef g(): pass") == function + "    return x + 1"
    assert ruhumaneval.postprocess(p, "    return x + 1<|end|>", ("<|end|>",)) == function + "    return x + 1"
    assert ruhumaneval.unwrap_fence("```python\n    return x + 1\n```") == "\n    return x + 1\n"
    assert ruhumaneval.unwrap_fence("~~~python a~~~") == " a"
    # MERA leaves a fence alone when the text starts with whitespace or does not end with the fence
    assert ruhumaneval.unwrap_fence("\n```python\nx\n```") == "\n```python\nx\n```"
    assert ruhumaneval.unwrap_fence("```python\nx\n``` tail") == "```python\nx\n``` tail"
    assert ruhumaneval.reference_solution(p) == function + "    return x + 1\n"


def write(tmp_path, records) -> LoadOptions:
    (tmp_path / "ruhumaneval").mkdir(exist_ok=True)
    (tmp_path / "ruhumaneval" / "public_test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return LoadOptions(tmp_path)


@pytest.mark.parametrize("change, message", [
    (lambda r: r["inputs"].update(tests="[{'x': 1},"), "malformed ruHumanEval record (SyntaxError"),
    (lambda r: r["inputs"].update(tests="{'x': 1}"), "inputs.tests must be the literal of a list of dicts"),
    (lambda r: r.update(outputs=["", "", "", ""]), "no expected outputs (the test split"),
    (lambda r: r.update(outputs=["2"]), "4 tests but 1 expected outputs"),
    (lambda r: r["meta"].pop("entry_point"), "malformed ruHumanEval record (KeyError"),
])
def test_a_malformed_record_fails_the_load_in_one_line(tmp_path, problems, change, message):
    record = json.loads(json.dumps(problems[0].record))
    change(record)
    with pytest.raises(UsageError) as err:
        get_task("ruhumaneval").load(write(tmp_path, [problems[1].record, record]))
    assert message in str(err.value) and "record 1" in str(err.value) and "\n" not in str(err.value)


def test_missing_data_is_one_line(tmp_path):
    with pytest.raises(UsageError, match="expected ruhumaneval/public_test.jsonl"):
        get_task("ruhumaneval").load(LoadOptions(tmp_path))
    with pytest.raises(UsageError, match="HF hub only"):
        get_task("ruhumaneval").load(LoadOptions(None))


def test_meras_task_json_layout_loads_too(tmp_path, problems):
    (tmp_path / "ruhumaneval").mkdir()
    data = {"data": {"train": [p.record for p in problems]}}
    (tmp_path / "ruhumaneval" / "task.json").write_text(json.dumps(data, ensure_ascii=False))
    assert [p.record for p in get_task("ruhumaneval").load(LoadOptions(tmp_path))] == [p.record for p in problems]


def test_canonical_solutions_pass_and_the_mera_executor_hides_module_names(problems, sandbox):
    """The correct mode passes every canonical solution. MERA's exec without a globals dict
    leaves top-level imports (hypot_floor: math), top-level helpers (count_primes: is_prime)
    and the function's own name (fib's recursion) out of reach at call time: every call
    raises NameError and the result is None; closures and typing imports still work."""
    fresh, compat = {}, {}
    for p in problems:
        [fresh[p.record["meta"]["entry_point"]]] = run("ruhumaneval", p, [ruhumaneval.reference_solution(p)], sandbox)
        [compat[p.record["meta"]["entry_point"]]] = run("ruhumaneval-mera-compat", p,
                                                        [ruhumaneval.reference_solution(p)], sandbox)
    assert all(v.passed and set(v.tests) == {1} for v in fresh.values()), fresh
    assert {e for e, v in compat.items() if v.passed} == {"inc", "parse_nested_parens", "words"}
    for entry in ("hypot_floor", "count_primes"):
        v = compat[entry]
        assert v.status == "failed" and set(v.tests) == {ruhumaneval.RAISED}, v
    # fib(0) and fib(1) return before recursing: only the recursive calls fail
    assert compat["fib"].tests == (1, 1, -1, -1) and fresh["fib"].tests == (1, 1, 1, 1)


def test_failing_samples_and_their_per_test_codes(problems, sandbox):
    p = problems[0]  # inc: expected 2, 0, 1, 42
    body = [
        "    return x + 1 if x > 0 else x\n",  # two wrong outputs
        "    return None if x == 1 else x + 1\n",  # None compares as "None"
        "    raise ValueError(x)\n",  # every call raises: None
        "    return str(x + 1)\n",  # str(result): the same text passes
        "    return x + 1\nraise RuntimeError('at import')\n",  # exec raises: [None] * 4
        "    raise SystemExit(0)\n",  # not an Exception: kills MERA's child too
        "    print('noise')\n    return x + 1\n",  # output does not matter
        "    return sum(range(10 ** 9))\n",  # a call overruns: no result at all ("timed out")
    ]
    function = p.record["inputs"]["function"]
    verdicts = run("ruhumaneval", p, [function + b for b in body], sandbox)
    assert [v.passed for v in verdicts] == [False, False, False, True, False, False, True, False]
    assert verdicts[0].tests == (1, 0, 0, 1) and verdicts[0].detail == "2/4 outputs match"
    assert verdicts[1].tests == (-1, 1, 1, 1)
    assert verdicts[2].tests == verdicts[4].tests == (-1,) * 4
    assert verdicts[5].status == "failed" and verdicts[5].tests == (-1,) * 4
    assert verdicts[6].tests == (1,) * 4
    assert verdicts[7].status == "timeout" and verdicts[7].tests == (-2,) * 4


def test_cpu_limits_around_exec_and_around_the_program(problems, sandbox):
    """An exec that overruns its limit gives [None] * n (MERA's TimeoutException is an
    Exception); a call that overruns kills the program (MERA: "timed out"). The limits are
    shrunk to 0.3 s and 0.8 s here (MERA's 3 s and 4 s in the task)."""
    p = problems[0]
    function = p.record["inputs"]["function"]
    loop_in_exec = function + "    return x + 1\nwhile True:\n    pass\n"
    loop_in_call = function + "    while True:\n        pass\n"
    for task in ("ruhumaneval", "ruhumaneval-mera-compat"):
        in_exec, in_call = run(task, p, [loop_in_exec, loop_in_call], sandbox, exec_limit_s=0.3, timeout_s=0.8)
        assert (in_exec.status, in_exec.tests) == ("failed", (-1,) * 4), in_exec
        assert (in_call.status, in_call.tests) == ("timeout", (-2,) * 4), in_call
    assert get_task("ruhumaneval").execution.exec_limit_s == 3.0
    assert get_task("ruhumaneval").execution.timeout_s == 4.0


def test_a_program_cannot_forge_its_results(problems, sandbox):
    """The harness writes its line after the program ran and the judge reads the last line;
    a program that writes a passing line and leaves early never ran to its end."""
    p = problems[0]
    fake = json.dumps({"results": [[ruhumaneval.digest(o), o] for o in ruhumaneval.expected_outputs(p.record)]})
    forge = ("import os\nos.write(int(os.environ['CODEEVAL_RESULT_FD']), " + repr(fake + "\n") + ".encode())\n")
    function = p.record["inputs"]["function"]
    verdicts = run("ruhumaneval", p, [function + "    return 0\n" + forge,
                                      function + "    return 0\n" + forge + "os._exit(0)\n"], sandbox)
    assert [v.passed for v in verdicts] == [False, False]
    assert verdicts[0].tests == (0, 1, 0, 0)  # the real results: inc(-1) is expected to be 0


def test_pass_at_k_is_meras_over_ten_samples(problems):
    """MERA: n = 10 samples, compute_pass_k(n, c, k) for k in 1, 5, 10, mean over problems."""
    def mera(n, c, k):
        return 1.0 if n - c < k else 1.0 - np.prod(1.0 - k / np.arange(n - c + 1, n + 1))

    metric = get_task("ruhumaneval").metrics[0]
    counts = {problems[0].task_id: 3, problems[1].task_id: 0, problems[2].task_id: 10}
    samples = [Sample(t, i, "", Verdict("passed" if i < c else "failed", i < c)) for t, c in counts.items()
               for i in range(10)]
    got = metric.compute(problems[:3], samples, [1, 5, 10])
    for k in (1, 5, 10):
        assert got[f"pass@{k}"] == pytest.approx(np.mean([mera(10, c, k) for c in counts.values()]))
    assert got["pass@1"] == pytest.approx((0.3 + 0 + 1) / 3)


def test_fixtures_are_self_consistent(problems):
    """The fixtures' outputs are what their canonical solutions give (run here on the host:
    fixture data, not model output)."""
    import ast

    for p in problems:
        namespace: dict = {}
        exec(ruhumaneval.reference_solution(p), namespace)  # noqa: S102 - our own fixture code
        fn = namespace[p.record["meta"]["entry_point"]]
        got = [str(fn(**t)) for t in ast.literal_eval(p.record["inputs"]["tests"])]
        assert got == ruhumaneval.expected_outputs(p.record)


def test_chat_prompts_send_meras_query_and_prefill_the_function(problems):
    from codeeval.generation import GenerationArgs
    from codeeval.generation.prompts import chat

    p = problems[0]
    rendered = chat.render(p.prompt, GenerationArgs(instruction_tokens="<u>,<e>,<a>"), get_task("ruhumaneval"), p)
    function = p.record["inputs"]["function"]
    assert rendered.text == "<u>" + p.prompt + "<e><a>```python\n" + function
    # the continuation is the body, cut at the closing fence, then post-processed as without chat
    body = chat.finish_continuation("    return x + 1\n```\nГотово.", rendered.mode)
    assert ruhumaneval.postprocess(p, body) == function + "    return x + 1\n"


def test_compare_is_meras_check_solution():
    d = ruhumaneval.digest
    # a None result compares as the text "None" (MERA2: str(true) == str(pred))
    assert ruhumaneval.compare(["1", "None"], [[d("1"), "1"], None]) == (True, (1, 1))
    assert ruhumaneval.compare(["1", "2"], [[d("1"), "1"], [d("3"), "3"]]) == (False, (1, 0))
    # an empty or wrong-length result list fails; so does a line the harness did not write
    assert ruhumaneval.compare(["1"], []) == (False, ())
    assert ruhumaneval.compare(["1"], [[d("1"), "1"], None]) == (False, ())
    assert ruhumaneval.compare(["1"], [5]) == (False, ())
