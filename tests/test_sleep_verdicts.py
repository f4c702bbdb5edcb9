"""Programs that sleep just under and just over each family's limit get the reference harness's
verdict (issue 37), in the Docker sandbox, on an idle machine and again while this test's own
spinners keep every core busy: a limit is the reference's wall-clock seconds applied to the
program's clock, its wall time less the time it waited for a CPU, so sleeping counts and the
load does not.

The references' limits: bigcode's 3 s (HumanEval, MBPP, PAL); apps_metric's `signal.alarm(4)` per
test and `join(10 + 1)` per sample; MERA's 3 s around exec and `join(3 + 1)` per program; EvalPlus's
max(4 s, 4 x the canonical time) per input; MultiPL-E's per-step timeouts (Ruby 5 s, rustc 15 s then
the binary 5 s). DS-1000's 60 s per test case is too long to sleep through here: its harness's
clocked case is checked at 1.5 s.

Every program of a condition runs at once (sleeping costs no CPU), the longest first: ~15 s a
condition."""
from __future__ import annotations

import base64
import contextlib
import dataclasses
import json
import pickle
import re
import threading

import pytest
from docker_env import busy_cores, ensure_images
from multiple_bodies import BODIES

from codeeval.benchmarks import ds1000
from codeeval.benchmarks.registry import get_task
from codeeval.benchmarks.spec import LoadOptions
from codeeval.executors.base import Program
from codeeval.executors.docker.sandbox import DockerSandbox

from test_apps import FIXTURES
from test_multiple import ensure_multiple_images

ADD = "HumanEval_53_add"


def sleep_after(program: str, seconds: float) -> str:
    return f"{program}\nimport time as _time\n_time.sleep({seconds})\n"


def apps_sleeping_in_each_test(problem, solution: str, seconds: float) -> str:
    """A standard-input solution whose body (apps_metric wraps it into code(), run per test) sleeps first."""
    assert "fn_name" not in json.loads(problem.record["input_output"])
    return f"import time\ntime.sleep({seconds})\n{solution}"


def apps_call_sleeping(problem, solution: str, seconds: float) -> str:
    fn = json.loads(problem.record["input_output"])["fn_name"]
    return (f"{solution}\nimport time as _time\n_orig = {fn}\ndef {fn}(*args):\n    _time.sleep({seconds})\n"
            f"    return _orig(*args)\n")


def python_cases(data_dir):
    """[(name, task, problem, completion, expected verdict: a dict of Verdict fields)]"""
    def first(name, index=0, data=data_dir):
        task = get_task(name)
        return task, task.load(LoadOptions(data))[index]

    cases = []
    for name, index in (("humaneval", 0), ("mbpp", 0), ("pal-gsm8k-greedy", 5)):  # bigcode: 3 s
        task, problem = first(name, index)
        right = task.reference_solution(problem)
        cases += [(f"{name} 2.5 s", task, problem, sleep_after(right, 2.5), {"passed": True}),
                  (f"{name} 3.5 s", task, problem, sleep_after(right, 3.5), {"passed": False, "status": "timeout"})]
    # apps_metric: 4 s per test, 11 s per sample
    task, stdin3 = first("apps-introductory", 0, FIXTURES)  # a + b, three tests
    _, call2 = first("apps-introductory", 1, FIXTURES)  # add_one, two tests
    cases += [
        ("apps 3 x 3.3 s", task, stdin3, apps_sleeping_in_each_test(stdin3, task.reference_solution(stdin3), 3.3),
         {"passed": True, "tests": (1, 1, 1)}),
        ("apps 3 x 3.8 s: past the sample's 11 s", task, stdin3,
         apps_sleeping_in_each_test(stdin3, task.reference_solution(stdin3), 3.8),
         {"passed": False, "status": "timeout", "tests": (-1, -1, -1)}),
        ("apps 2 x 4.5 s: past each test's 4 s", task, call2,
         apps_call_sleeping(call2, task.reference_solution(call2), 4.5),
         {"passed": False, "status": "failed", "tests": (-1, -1)}),
    ]
    # MERA: 3 s around exec, 4 s for the program (its four calls run after exec)
    task, inc = first("ruhumaneval", 0, FIXTURES)
    right = task.reference_solution(inc)
    slow_calls = right + "\n_inc = inc\ndef inc(x):\n    import time\n    time.sleep({})\n    return _inc(x)\n"
    cases += [
        ("ruhumaneval exec 2.5 s", task, inc, sleep_after(right, 2.5), {"passed": True, "tests": (1,) * 4}),
        ("ruhumaneval exec 3.5 s", task, inc, sleep_after(right, 3.5),
         {"passed": False, "status": "failed", "tests": (-1,) * 4}),
        ("ruhumaneval calls 4 x 0.75 s", task, inc, slow_calls.format(0.75), {"passed": True, "tests": (1,) * 4}),
        ("ruhumaneval calls 4 x 1.2 s", task, inc, slow_calls.format(1.2),
         {"passed": False, "status": "timeout", "tests": (-2,) * 4}),
    ]
    # EvalPlus: max(4 s, 4 x the canonical time) on one plus input
    task, p = first("humanevalplus")
    n_base, plus1 = len(p.record["base_input"]), p.record["plus_input"][1]
    name = p.record["entry_point"]

    def slow_on_plus1(seconds):
        return (p.record["prompt"] + p.record["canonical_solution"] + f"\n_canonical = {name}\n"
                f"def {name}(*args):\n    if list(args) == {plus1!r}:\n        import time\n"
                f"        time.sleep({seconds})\n    return _canonical(*args)\n")

    cases += [
        ("humanevalplus input 3.5 s", task, p, slow_on_plus1(3.5), {"passed": True}),
        ("humanevalplus input 4.5 s", task, p, slow_on_plus1(4.5),
         {"passed": False, "subsets": {"base": True, "plus": False}, "test": (n_base + 1, -2)}),
    ]
    return cases


def ds1000_case(seconds: float) -> Program:
    """The DS-1000 2022 harness on an invented one-case problem whose program sleeps; a 1.5 s case limit."""
    files = {"test_code.py": b"def test(result, ans):\n    return int(result == ans)\n", "ans/ans1.pkl": pickle.dumps(1)}
    problem = {"files": {k: base64.b64encode(v).decode() for k, v in files.items()}, "lib": "Numpy",
               "code_context": "import pickle\n[insert]\nwith open('result/result_1.pkl', 'wb') as fh:\n"
                               "    pickle.dump(result, fh)\n",
               "test_type": 1, "test_case_cnt": 1, "case_limit_s": 1.5}
    return Program(f"ds1000 case {seconds} s", ds1000.HARNESS, timeout_s=31.5, guard=False,
                   files={"problem.json": json.dumps(problem).encode(),
                          "solution.py": f"import time\ntime.sleep({seconds})\nresult = 1\n".encode()})


def multiple_cases(data_dir):
    """MultiPL-E: Ruby's one 5 s step; Rust's run step (5 s) after its compile step (15 s)."""
    out = []
    for lang, sleep in (("rb", "\n  $slept ||= (sleep({}); true)"),
                        ("rs", "\n    static ONCE: std::sync::Once = std::sync::Once::new();\n"
                               "    ONCE.call_once(|| std::thread::sleep(std::time::Duration::from_millis({})));")):
        task = get_task(f"multiple-{lang}")
        problem = next(p for p in task.load(LoadOptions(data_dir)) if p.task_id == ADD)
        right = BODIES[lang][ADD][0]
        for seconds, status in ((4.0, "OK"), (5.6, "Timeout")):  # 1 s under: Ruby starts slowly on a slow host
            amount = seconds if lang == "rb" else int(seconds * 1000)
            out.append((f"multiple-{lang} {seconds} s", task, problem, problem.prompt + sleep.format(amount) + right,
                        status))
    return out


def judged(box, cases, extra=()):
    """Every case's verdict, every program at once (the longest first): {name: Verdict}; `extra`
    programs' outcomes under their keys."""
    prepared = {}
    for task in {task.name: task for _, task, _, _, _ in cases}.values():  # EvalPlus: expected outputs
        problems = list({p.task_id: p for _, t, p, _, _ in cases if t.name == task.name}.values())
        prepared[task.name] = dict(task.execution.prepare(problems, box))
    programs = [dataclasses.replace(task.execution.build(problem, completion, prepared[task.name].get(problem.task_id)),
                                    key=name) for name, task, problem, completion, _ in cases]
    outcomes = {o.key: o for o in box.run(sorted([*programs, *extra], key=lambda p: -seconds_of(p.key)))}
    got = {name: task.execution.judge(problem, outcomes[name], prepared[task.name].get(problem.task_id))
           for name, task, problem, _, _ in cases}
    return {**got, **{p.key: outcomes[p.key] for p in extra}}


def seconds_of(name: str) -> float:
    """How long a case sleeps in all, from its name ("apps 3 x 3.3 s", "humaneval 2.5 s")."""
    count, seconds = re.search(r"(?:(\d+) x )?(\d+(?:\.\d+)?) s", name).groups()
    return int(count or 1) * float(seconds)


@pytest.fixture(scope="module")
def cases(data_dir):
    return python_cases(data_dir), multiple_cases(data_dir)


@pytest.fixture(scope="module")
def verdicts(cases):
    """{condition: {case name: Verdict, or the DS-1000 harness's Outcome}} for "idle" and "busy"."""
    ensure_images()
    ensure_multiple_images()
    cases, compiled_cases = cases
    extra = [ds1000_case(1.0), ds1000_case(2.0)]
    out = {}
    with DockerSandbox(n_workers=8) as python, DockerSandbox(n_workers=4, runtime="multiple-rb") as compiled:
        for condition in ("idle", "busy"):
            got = out[condition] = {}
            jobs = [lambda: got.update(judged(python, cases, extra)),
                    lambda: got.update(judged(compiled, compiled_cases))]
            with busy_cores() if condition == "busy" else contextlib.nullcontext() as hogs:
                threads = [threading.Thread(target=job) for job in jobs]
                for t in threads:
                    t.start()
                for t in threads:
                    t.join()
                assert not hogs or all(hog.poll() is None for hog in hogs), "the spinners did not run throughout"
            assert len(got) == len(cases) + len(compiled_cases) + len(extra), "a run failed"
    return out


CONDITIONS = ("idle", "busy")


@pytest.mark.parametrize("condition", CONDITIONS)
def test_python_families_get_the_references_verdicts(verdicts, condition, cases):
    wrong = {}
    for name, _, _, _, expected in cases[0]:
        v = verdicts[condition][name]
        seen = {"passed": v.passed, "status": v.status, "tests": v.tests, "subsets": v.subsets}
        if "test" in expected:  # (index, code): one test's code
            index = expected["test"][0]
            seen["test"] = (index, v.tests[index] if len(v.tests) > index else None)
        if any(seen[k] != want for k, want in expected.items()):
            wrong[name] = ({k: seen[k] for k in expected}, v.detail)
    assert not wrong, wrong


@pytest.mark.parametrize("condition", CONDITIONS)
def test_multiple_steps_get_the_references_verdicts(verdicts, condition, cases):
    got = {name: verdicts[condition][name].status for name, _, _, _, _ in cases[1]}
    assert got == {name: status for name, _, _, _, status in cases[1]}


@pytest.mark.parametrize("condition", CONDITIONS)
def test_a_ds1000_case_is_clocked(verdicts, condition):
    def report(seconds):
        [line] = verdicts[condition][f"ds1000 case {seconds} s"].reports(lambda data: "cases" in data)
        return line["cases"], line["passed"], line["exit_codes"]

    assert report(1.0) == ([1], True, [0])
    assert report(2.0) == ([0], False, [-9])
    assert ds1000.CASE_TIMEOUT_S == 60.0
