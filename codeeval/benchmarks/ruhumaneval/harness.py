"""Runs inside the sandbox (stdlib + numpy): one ruHumanEval program against its test inputs,
as MERA's `unsafe_execute` (benchmark_tasks/ruhumaneval/utils.py) runs it.

Sent as the program's code, with these files in its working directory:
  job.json      {"mode": "mera" | "fresh", "entry_point", "exec_limit_s"}
  tests.txt     the record's `inputs.tests`: a Python literal, a list of kwargs dicts
  solution.py   `inputs.function` + the generation

MERA executes the program with `exec(program)` inside a function (no globals dict: its
top-level names land in that function's locals, its functions see the reference module's
globals), under a 3 s alarm with its output swallowed, then calls `locals()[entry_point](**test)`
for each test: `str(result)`, or None when the result is None or the call raised an Exception.
If exec raises, every result is None. "mera" reproduces that, the executing function's
globals being a namespace with the reference module's names; "fresh" runs the program as a
module (its own globals dict), so top-level imports, helpers and recursion work. The 3 s
limit (MERA's ITIMER_REAL) applies to the program's clock, its wall time less the time it
waited for a CPU (cputime.Alarm), and to its CPU time (ITIMER_PROF); the 4 s of MERA's
`join(timeout + 1)` are the whole program's clock and CPU limit (host side). A BaseException
that is not an Exception escapes, as it kills MERA's child: no result is written (MERA: "timed
out").

One JSON line goes to the result channel (fd CODEEVAL_RESULT_FD):
  {"results": [null | [sha256 of str(result), its first 200 chars], one per test]}
The host compares the digests with the expected outputs' (large results need not travel).
"""
import ast
import contextlib
import hashlib
import io
import json
import os
import signal

import cputime  # the sandbox's own (the runner's directory; imported in its server)
from quiet_io import swallowed as swallow_io  # inlined when shipped (codeeval/benchmarks/harness_text.py)

MERA_MODULE = '''
def unsafe_execute(check_program, test_cases, entry_point, result, timeout):
    import os
    import shutil

    rmtree = shutil.rmtree
    rmdir = os.rmdir
    chdir = os.chdir
    try:
        with swallow_io():
            with time_limit(timeout):
                exec(check_program)
        res = []
        for test in test_cases:
            try:
                test_res = locals()[entry_point](**test)
                if test_res is not None:
                    test_res = str(test_res)
            except Exception:
                test_res = None
            res.append(test_res)
        result.append(res)
    except Exception:
        result.append([None] * len(test_cases))
'''

# The reference module's other top-level names (utils.py): a program's function that looks up
# one of these as a global finds the reference's object, not its own top-level definition.
MERA_FUNCTIONS = ("process_results", "ruHumanEvalScoring", "preprocess_generation", "execute_function",
                  "check_correctness", "create_tempdir", "TimeoutException", "WriteOnlyStringIO",
                  "redirect_stdin", "chdir", "reliability_guard", "compute_pass_k", "check_solution")


class TimeoutException(Exception):
    pass


def time_limit(seconds):
    """MERA's time_limit, on the clock and the CPU time; its handlers installed anew at each call,
    as MERA's are."""
    def expired():
        raise TimeoutException("Timed out!")

    return cputime.TimeLimit(expired).running(seconds)


def _reference_stub(name):
    def stub(*args, **kwargs):
        raise TypeError(f"{name}() is the reference harness's own function")

    stub.__name__ = name
    return stub


def mera_namespace():
    """Globals like those of MERA's utils.py when its unsafe_execute runs."""
    import concurrent.futures
    import faulthandler
    import platform
    import tempfile
    import typing

    import numpy

    namespace = {"__name__": "ruhumaneval_utils", "ast": ast, "contextlib": contextlib, "faulthandler": faulthandler,
                 "io": io, "os": os, "platform": platform, "signal": signal, "tempfile": tempfile,
                 "ThreadPoolExecutor": concurrent.futures.ThreadPoolExecutor, "Dict": typing.Dict,
                 "List": typing.List, "np": numpy}
    namespace.update({name: _reference_stub(name) for name in MERA_FUNCTIONS})
    namespace.update(swallow_io=swallow_io, time_limit=time_limit, TimeoutException=TimeoutException)
    exec(compile(MERA_MODULE, "ruhumaneval_utils", "exec"), namespace)
    return namespace


def run_mera(program, tests, entry_point, limit):
    result = []
    mera_namespace()["unsafe_execute"](program, tests, entry_point, result, limit)
    return result[0]


def run_fresh(program, tests, entry_point, limit):
    namespace = {"__name__": "__main__"}
    try:
        with swallow_io():
            with time_limit(limit):
                exec(compile(program, "<solution>", "exec"), namespace)
    except Exception:
        return [None] * len(tests)
    results = []
    for test in tests:
        try:
            value = namespace[entry_point](**test)
            value = None if value is None else str(value)
        except Exception:
            value = None
        results.append(value)
    return results


def main():
    with open("job.json", encoding="utf-8") as fh:
        job = json.load(fh)
    with open("tests.txt", encoding="utf-8") as fh:
        tests = ast.literal_eval(fh.read())
    with open("solution.py", encoding="utf-8") as fh:
        program = fh.read()
    run = run_mera if job["mode"] == "mera" else run_fresh
    values = run(program, tests, job["entry_point"], job["exec_limit_s"])
    line = {"results": [None if v is None else [hashlib.sha256(v.encode("utf-8", "surrogatepass")).hexdigest(), v[:200]]
                        for v in values]}
    with os.fdopen(int(os.environ["CODEEVAL_RESULT_FD"]), "ab", closefd=False) as channel:
        channel.write(json.dumps(line).encode() + b"\n")


main()
