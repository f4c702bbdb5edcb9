"""Runs inside the sandbox (stdlib + numpy): one APPS sample against its problem's tests, with
the verdicts of the codeparrot/apps_metric `run_test` (hendrycks/apps testing_util), written here
anew (no `pyext`: a ModuleType and exec is all its RuntimeModule.from_string did).

Sent as the program's code, with these files in its working directory:
  io.json      the record's `input_output` text ({"inputs", "outputs"} and, call-based, "fn_name")
  solution.py  the sample

Writes one JSON line to the result channel (fd CODEEVAL_RESULT_FD) when every test has run:
  {"results": [...]}  the reference's per-test list: 1 (True), 0 (False), -1 (raised or timed
  out), -2 (did not compile or load: a single element). As there, a standard-input test whose
  token-set comparison raises appends nothing (the list can be shorter than the tests).
Nothing is written when the harness itself dies (the reference's child process died): the host
then scores every test -1, as apps_metric's check_correctness does.

Limits: the reference's per-test `signal.alarm(4)` (and 4 s to load the module) is applied twice
here: to the program's clock, its wall time less the time it waited for a CPU (cputime.Alarm,
ITIMER_REAL set again while it waited), and to its CPU time (ITIMER_PROF); its 11 s for the
whole sample (`join(timeout + 1)`) is the program's clock and CPU limit (host side).
"""
import json
import os
import sys
import types
from io import StringIO
from unittest.mock import mock_open, patch

import cputime  # the sandbox's own (the runner's directory; imported in its server)
import numpy as np

TEST_LIMIT_S = 4
# The imports apps_metric prepends to every solution (solutions rely on them).
HEADER = (
    "import sys\nimport time\nimport itertools\nfrom itertools import accumulate, product, permutations, "
    "combinations\nimport collections\nfrom collections import Counter, OrderedDict, deque, defaultdict, "
    "ChainMap\nfrom functools import lru_cache\nimport math\nfrom math import sqrt, sin, cos, tan, ceil, "
    "fabs, floor, gcd, exp, log, log2\nimport fractions\nfrom typing import List, Tuple\nimport numpy as np\n"
    "import random\nimport heapq\nfrom heapq import *\n"
)


class TestTimeout(Exception):
    """An Exception, as the reference's TimeoutException: code that catches Exception can swallow it."""


def _expired():
    raise TestTimeout()


LIMIT = None  # the clock's alarm and the CPU timer (cputime.TimeLimit), set up by main()


def limit(seconds):
    """The reference's signal.alarm(seconds), on the clock and on the CPU time (0 cancels both)."""
    LIMIT.set(seconds)


def wrap_stdin_program(code):
    """The reference's rewrite: lines not starting with `import `/`from ` are indented by a tab
    into `def code():`, preceded by `stdin = sys.stdin` and `stdout = sys.stdout`; imports after
    the first body line are indented too, earlier ones stay at module level."""
    out, started = [], False
    for line in code.split("\n"):
        is_import = line.startswith("from ") or line.startswith("import ")
        if not is_import and not started:
            out.append("stdin = sys.stdin\nstdout = sys.stdout\ndef code():\n\t" + line + "\n")
            started = True
        else:
            out.append(("\t" if started else "") + line + "\n")
    return "".join(out)


def load_module(source):
    module = types.ModuleType("tmp_sol")
    exec(compile(source, "<solution>", "exec"), module.__dict__)  # noqa: S102 - inside the sandbox
    return module


class Captured(list):
    """stdout as a list of lines while the block runs."""

    def __enter__(self):
        self._saved, self._buffer = sys.stdout, StringIO()
        self._buffer.close = lambda *args: 1
        sys.stdout = self._buffer
        return self

    def __exit__(self, *exc):
        self.extend(self._buffer.getvalue().splitlines())
        sys.stdout = self._saved


def feed_stdin(method, text):
    """Run `method` with the reference's patches (same stack, same order, same effect)."""
    lines = iter(text.split("\n"))

    @patch("builtins.open", mock_open(read_data=text))
    @patch("sys.stdin", StringIO(text))
    @patch("sys.stdin.readline", lambda *args: next(lines))
    @patch("sys.stdin.readlines", lambda *args: text.split("\n"))
    @patch("sys.stdin.read", lambda *args: text)
    def run(fn):
        try:
            return fn()
        except SystemExit:
            pass

    return run(method)


def _stripped_equal(a, b):
    return a.strip() == b.strip()


def _listy_equal(output, expected):
    ok = output == [expected]
    if isinstance(expected, list):
        ok = ok or output == expected
    return ok


def stdout_verdict(output, expected):
    """The reference's comparison cascade for a standard-input test, first success wins.
    None: the reference appends no result for this test."""
    if _stripped_equal("\n".join(output), expected) or _stripped_equal("\n".join(o.strip() for o in output),
                                                                        expected):
        return True
    ok = False
    try:  # the whole output as one element, or line by line
        ok = _listy_equal(output, expected)
        if isinstance(expected, list) and isinstance(output[0], str):
            ok = ok or [e.strip() for e in output] == expected
    except Exception:
        pass
    if ok == True:  # noqa: E712 - numpy booleans too
        return ok
    # the expected text as its non-empty lines, stripped
    if isinstance(expected, list):
        expected = [[x.strip() for x in e.split("\n") if x] for e in expected]
    else:
        expected = [x.strip() for x in expected.split("\n") if x]
    try:
        ok = _listy_equal(output, expected)
    except Exception:
        pass
    if ok == True:  # noqa: E712
        return ok
    output = [o for o in output if o]
    try:
        ok = _listy_equal(output, expected)
    except Exception:
        pass
    try:  # numbers, line by line
        got, want = [float(e) for e in output], [float(e) for e in expected]
        ok = ok or (len(got) == len(want) and np.allclose(got, want))
    except Exception:
        pass
    try:
        if isinstance(output[0], list):
            got, want = [float(e) for e in output[0]], [float(e) for e in expected[0]]
            ok = ok or (len(got) == len(want) and np.allclose(got, want))
    except Exception:
        pass
    if ok == True:  # noqa: E712
        return ok
    # token sets
    expected = [set(e.split()) for e in expected]
    try:
        ok = output == expected
    except Exception:
        return None
    if ok == True:  # noqa: E712
        return ok
    output = [set(tokens) for tokens in (o.split() for o in output) if tokens]
    try:
        ok = set(frozenset(s) for s in output) == set(frozenset(s) for s in expected)
    except Exception:
        pass
    try:  # numbers rounded to 3 decimals
        ok = ok or (set(frozenset(round(float(t), 3) for t in s) for s in output)
                    == set(frozenset(round(float(t), 3) for t in s) for s in expected))
    except Exception:
        pass
    return ok


def int_keys(value):
    return {int(k): v for k, v in value.items()}


def call_based_verdict(method, inputs, expected):
    output = method(*inputs)
    if isinstance(output, tuple):
        output = list(output)
    ok = output == expected
    if isinstance(expected, list) and expected:
        ok = ok or output == expected[0]
    try:
        if isinstance(output[0], tuple):
            ok = ok or [list(x) for x in output] == expected[0]
    except Exception:
        pass
    return ok


def run_tests(in_outs, code):
    """The per-test results of one sample (apps_metric's run_test)."""
    fn_name = in_outs.get("fn_name")
    call_based = fn_name is not None
    results = []
    if call_based:
        source = HEADER + code
    else:
        source, fn_name = HEADER + wrap_stdin_program(code), "code"
    limit(TEST_LIMIT_S)
    try:
        module = load_module(source)
        target = module.Solution() if call_based and "class Solution" in code else module
        limit(0)
    except Exception:
        limit(0)
        return [-2]
    try:
        method = getattr(target, fn_name)
    except Exception:
        return [-2]
    outputs = in_outs["outputs"]
    for index, inputs in enumerate(in_outs["inputs"]):
        # JSON forces string dict keys: the reference turns them back into ints
        try:
            if isinstance(inputs[0], dict):
                inputs = [int_keys(inputs[0])]
        except Exception:
            pass
        for unwrap in (False, True):
            try:
                value = outputs[index][0] if unwrap else outputs[index]
                if isinstance(value, dict):
                    outputs[index] = [int_keys(value)]
            except Exception:
                pass
        if call_based:
            limit(TEST_LIMIT_S)
            try:
                ok = call_based_verdict(method, inputs, outputs[index])
                limit(0)
            except Exception:
                limit(0)
                results.append(-1)
                continue
            results.append(ok)
            continue
        limit(TEST_LIMIT_S)
        if isinstance(inputs, list):
            inputs = "\n".join(inputs)
        if isinstance(outputs[index], list):
            outputs[index] = "\n".join(outputs[index])
        passed = False
        with Captured() as output:
            try:
                feed_stdin(method, inputs)
                passed = True
            except Exception:
                results.append(-1)
            limit(0)
        if passed:
            verdict = stdout_verdict(list(output), outputs[index])
            if verdict is not None:
                results.append(verdict)
    return results


def code_of(value):
    """A result as the metric reads it: numpy arrays and booleans as apps_metric fixes them,
    then 1/0 for True/False."""
    if isinstance(value, np.ndarray):
        value = value.item(0)
    if isinstance(value, (bool, np.bool_)):
        return int(bool(value))
    if isinstance(value, (int, float)) and value in (-1, -2):
        return int(value)
    return int(bool(value))


def main():
    with open("io.json", encoding="utf-8") as fh:
        in_outs = json.loads(fh.read())
    with open("solution.py", encoding="utf-8") as fh:
        code = fh.read()
    global LIMIT
    LIMIT = cputime.TimeLimit(_expired)
    sys.stdin = open(os.devnull)  # noqa: SIM115 - a multiprocessing child's stdin, as in the reference
    results = [code_of(r) for r in run_tests(in_outs, code)]
    with os.fdopen(int(os.environ["CODEEVAL_RESULT_FD"]), "ab", closefd=False) as channel:
        channel.write(json.dumps({"results": results}).encode() + b"\n")


main()
