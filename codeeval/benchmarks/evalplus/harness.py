"""Runs inside the sandbox (stdlib + numpy): EvalPlus's differential testing of one solution.

Sent as the program's code, with these files in its working directory:
  problem.pkl   {"mode": "check" | "truth", "entry_point", "atol", "special", "groups": [
                 {"name", "inputs", "limits" (CPU seconds per input), "budget" (CPU seconds in all),
                  "recompute" (indices of the outputs not shipped)}]}
  expected.pkl  the canonical solution's outputs per group name (written by "truth" mode);
                None where an output was too large to ship
  canonical.py  the canonical solution, when some outputs must be recomputed
  solution.py   the program to test (the canonical solution itself in "truth" mode)

"check" judges each input as the evalplus package's `unsafe_execute` does: a fresh namespace
per group (EvalPlus runs each group in its own process), stdout/stderr swallowed, per-input
time limit, `out == exp` with its special oracles, float comparison with `atol` (1e-6 once a
float is expected, for the rest of the group), and stop at the group's first failure
(EvalPlus's default fast check). Each limit (EvalPlus's ITIMER_REAL per input, its process
timeout per group) is applied twice: to the program's clock, its wall time less the time it
waited for a CPU (cputime.own_clock, cputime.Alarm), and to its CPU time (ITIMER_PROF,
time.process_time); a group whose budget runs out is "timeout". After each
group one JSON line goes to the result channel (fd CODEEVAL_RESULT_FD):
  {"group", "status": "pass" | "fail" | "timeout", "tests": [1 pass, 0 wrong, -1 raised, -2 timed out]}
"truth" writes one JSON line {"times": {group: [clock seconds per input]}, "recompute": {group:
[indices]}} and then the pickle of the outputs, which the host keeps as opaque bytes for later
"check" runs (HumanEval/15's outputs alone pickle to 147 MB: large ones are recomputed in the
check from the canonical solution, on a copy of the input, not counted in the group's time).
"""
import copy
import json
import math
import os
import pickle
import time

import cputime  # the sandbox's own (the runner's directory; imported in its server)
import numpy as np

from quiet_io import swallowed  # inlined when shipped (codeeval/benchmarks/harness_text.py)

PASS, WRONG, RAISED, TIMED_OUT = 1, 0, -1, -2
SHIP_MAX, SHIP_TOTAL = 64 * 1024, 16 * 1024 * 1024  # bytes of pickled expected output per input / in all


class TimeLimit(Exception):
    pass


def _expired():
    raise TimeLimit()


CLOCK = cputime.own_clock()  # this process's wall time less its run-queue delay
LIMIT = None  # on CLOCK and the CPU time (cputime.TimeLimit), set up by main()


def time_limit(cpu_s, clock_s, now):
    """EvalPlus's time_limit: `cpu_s` of CPU time, `clock_s` of the clock from its reading `now`."""
    return LIMIT.running(max(cpu_s, 1e-3), max(clock_s, 1e-3), now)


def is_floats(x):
    if isinstance(x, float):
        return True
    if isinstance(x, (list, tuple)) and x:
        return all(isinstance(i, float) for i in x)
    if isinstance(x, np.ndarray):
        return x.dtype == np.float64 or x.dtype == np.float32
    return False


def poly(xs, x):
    return sum(c * math.pow(x, i) for i, c in enumerate(xs))


def pyramid_surface(base_edge, height):
    slant = math.sqrt((base_edge / 2) ** 2 + height ** 2)
    return round(base_edge ** 2 + 2 * base_edge * slant)


def digit_distance(a, b):
    x, y = str(a), str(b)
    width = max(len(x), len(y))
    return sum(abs(int(p) - int(q)) for p, q in zip(x.zfill(width), y.zfill(width)))


def matches(special, out, exp, inp, atol):
    """(matched, atol for the next inputs). Raises where EvalPlus's assertions raise."""
    if special == "find_zero":
        assert abs(poly(*inp, out)) <= atol
        return True, atol
    exact = out == exp
    if special == "always":
        exact = True
    elif special == "zero_ok":
        exact = exact or out == 0
    elif special == "pyramid":
        exact = exact or abs(out - pyramid_surface(*inp)) <= atol
    elif special == "digit_distance":
        exact = exact or out == digit_distance(*inp)
    elif special == "set_eq":
        exact = set(out) == set(exp)
    elif special == "not_none":
        exact = out == exp if isinstance(out, bool) else exp == (out is not None)
    if atol == 0 and is_floats(exp):
        atol = 1e-6
    if not exact and atol != 0:
        assert type(out) == type(exp)  # noqa: E721 - EvalPlus compares types exactly
        if isinstance(exp, (list, tuple)):
            assert len(out) == len(exp)
        assert np.allclose(out, exp, rtol=1e-07, atol=atol)
    else:
        assert exact
    return True, atol


class Expected:
    """The canonical outputs: shipped in expected.pkl, except the large ones (marked None there),
    which are recomputed here from canonical.py on a copy of the input, off the group's clock."""

    def __init__(self, problem, shipped):
        self.problem, self.shipped, self.canonical = problem, shipped, None
        self.spent_cpu = self.spent_clock = 0.0  # seconds spent recomputing

    def get(self, group, i, inp):
        if i not in group.get("recompute", ()):
            return self.shipped[group["name"]][i]
        started, started_clock = time.process_time(), CLOCK()
        if self.canonical is None:
            with open("canonical.py", encoding="utf-8") as fh:
                self.canonical = load(fh.read(), self.problem["entry_point"])
        with swallowed():
            out = expected_output(self.problem, self.canonical, inp)
        self.spent_cpu += time.process_time() - started
        self.spent_clock += CLOCK() - started_clock
        return out


def load(source, entry_point):
    namespace = {}
    exec(compile(source, "<solution>", "exec"), namespace)
    return namespace[entry_point]


def expected_output(problem, fn, inp):
    out = fn(*copy.deepcopy(inp))
    return out is not None if problem["special"] == "not_none" else out


def check_group(source, problem, group, expected):
    started, started_clock = time.process_time(), CLOCK()
    tests = []
    try:
        with swallowed():
            fn = load(source, problem["entry_point"])
    except BaseException:
        return "fail", tests
    atol = problem["atol"]
    for i, (inp, limit) in enumerate(zip(group["inputs"], group["limits"])):
        exp = expected.get(group, i, inp)
        now = CLOCK()
        cpu_left = group["budget"] - (time.process_time() - started - expected.spent_cpu)
        clock_left = group["budget"] - (now - started_clock - expected.spent_clock)
        left = min(cpu_left, clock_left)
        if left <= 0:  # EvalPlus's parent kills the group's process: TIMEOUT
            return "timeout", tests
        try:
            with time_limit(min(limit, cpu_left), min(limit, clock_left), now):
                with swallowed():
                    out = fn(*inp)
            _, atol = matches(problem["special"], out, exp, inp, atol)
            tests.append(PASS)
        except TimeLimit:
            tests.append(TIMED_OUT)
            return ("timeout" if left < limit else "fail"), tests
        except AssertionError:
            tests.append(WRONG)
            return "fail", tests
        except BaseException:
            tests.append(RAISED)
            return "fail", tests
    return "pass", tests


def truth(source, problem):
    """Outputs and clock seconds per input (EvalPlus times the canonical solution's wall time);
    outputs over SHIP_MAX bytes (or past SHIP_TOTAL in all) are not shipped but named for
    recomputation."""
    fn = load(source, problem["entry_point"])
    outputs, times, recompute, total = {}, {}, {}, 0
    for group in problem["groups"]:
        outs, spent, big = [], [], []
        for i, inp in enumerate(group["inputs"]):
            started = CLOCK()
            out = expected_output(problem, fn, inp)
            spent.append(CLOCK() - started)
            size = len(pickle.dumps(out))
            if size > SHIP_MAX or total + size > SHIP_TOTAL:
                out = None
                big.append(i)
            else:
                total += size
            outs.append(out)
        name = group["name"]
        outputs[name], times[name], recompute[name] = outs, spent, big
    return outputs, times, recompute


def report(data):
    with os.fdopen(int(os.environ["CODEEVAL_RESULT_FD"]), "ab", closefd=False) as channel:
        channel.write(data)


def main():
    with open("problem.pkl", "rb") as fh:
        problem = pickle.load(fh)
    with open("solution.py", encoding="utf-8") as fh:
        source = fh.read()
    if problem["mode"] == "truth":
        outputs, times, recompute = truth(source, problem)
        report(json.dumps({"times": times, "recompute": recompute}).encode() + b"\n" + pickle.dumps(outputs))
        return
    global LIMIT
    LIMIT = cputime.TimeLimit(_expired, CLOCK)
    with open("expected.pkl", "rb") as fh:
        expected = Expected(problem, pickle.load(fh))
    for group in problem["groups"]:
        status, tests = check_group(source, problem, group, expected)
        report(json.dumps({"group": group["name"], "status": status, "tests": tests}).encode() + b"\n")


main()
