"""Runs inside the DS-1000 sandbox image: one sample of a 2022-format DS-1000 problem, judged as
HKUNLP's `DS1000Problem.test` judges it (ds1000.py at 49c1c543, which bigcode downloads).

Sent as the program's code (without bigcode's guard: the reference runs `python program.py`
through a shell with nothing disabled), with these files in its working directory:
  problem.json  {"files": {relative path: base64}, "code_context", "lib", "test_type", "test_case_cnt",
                "case_limit_s"}
  solution.py   the post-processed sample
Steps, as the reference: the problem folder's files are written out and `result/` made; for
Matplotlib, lines with plt.show(), plt.clf(), plt.close() or savefig are dropped from the
sample; program.py is code_context with `[insert]` replaced; each case runs as
`python program.py --test_case i` (exit codes ignored, `case_limit_s` each (60 s, the
reference's `subprocess` timeout), applied to the case's clock, its wall time less the time it
waited for a CPU (cputime.wait_clocked), and to its CPU time (RLIMIT_CPU)); test_type 3 calls
stringTest on the sample without its print lines (the reference's filter, which skips lines
while removing); a case passes iff result/result_{i}.pkl loads and `test(result, ans_i) == 1`,
stopping at the first failure.
One JSON line goes to the result channel: {"cases": [1 | 0 per case judged], "passed": bool,
"exit_codes": [...]}.
"""
import base64
import importlib.util
import json
import math
import os
import pickle
import resource
import signal
import subprocess
import sys
import tempfile

import cputime  # the sandbox's own (the runner's directory; imported in its server)

MATPLOTLIB_DROPPED = ("plt.show()", "plt.clf()", "plt.close()", "savefig")


def write_files(files):
    for rel, data in files.items():
        parts = rel.split("/")
        if rel.startswith("/") or ".." in parts:
            raise ValueError(f"bad file name in the problem: {rel!r}")
        if len(parts) > 1:
            os.makedirs(os.path.dirname(rel), exist_ok=True)
        with open(rel, "wb") as fh:
            fh.write(base64.b64decode(data))


def matplotlib_lines(code):
    return "\n".join(line for line in code.split("\n") if not any(p in line for p in MATPLOTLIB_DROPPED))


def without_prints(code):
    """The reference's filter, bug for bug: it removes from the list it iterates (so the line
    after a removed one is not looked at), and its `#` test is a list-membership test."""
    lines = code.split("\n")
    for line in lines:
        if "print" in line and "#" not in line.split("print"):
            lines.remove(line)
    return "\n".join(lines)


def run_case(i, seconds):
    def limit_case():
        resource.setrlimit(resource.RLIMIT_CPU, (math.ceil(seconds), math.ceil(seconds) + 1))
        os.setsid()

    with tempfile.TemporaryFile() as err:  # unnamed: the program does not see it
        proc = subprocess.Popen([sys.executable, "program.py", "--test_case", str(i)], stdout=subprocess.DEVNULL,
                                stderr=err, preexec_fn=limit_case)
        ended, _ = cputime.wait_clocked(proc.pid, seconds)
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass
        code = proc.wait()
        err.seek(0, os.SEEK_END)
        err.seek(max(0, err.tell() - 2000))
        sys.stderr.write(err.read().decode("utf-8", "replace")[-2000:])
    return code if ended else -9


def load_module(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def load_answer(i):
    """The reference loads ans/ans{i}.pkl up front: None when missing or unreadable."""
    try:
        with open(f"ans/ans{i}.pkl", "rb") as fh:
            return pickle.load(fh)
    except Exception:
        return None


def main():
    with open("problem.json", encoding="utf-8") as fh:
        problem = json.load(fh)
    with open("solution.py", encoding="utf-8") as fh:
        code = fh.read()
    write_files(problem["files"])
    os.makedirs("result", exist_ok=True)
    count = max(1, int(problem["test_case_cnt"]))
    answers = [load_answer(i) for i in range(1, count + 1)]
    if problem["lib"] == "Matplotlib":
        code = matplotlib_lines(code)
    with open("program.py", "w", encoding="utf-8") as fh:
        fh.write(problem["code_context"].replace("[insert]", code))
    exit_codes = [run_case(i, float(problem["case_limit_s"])) for i in range(1, count + 1)]
    test_module = load_module("test_code.py", "test_code")
    passed = True
    if int(problem["test_type"]) == 3:
        try:
            passed = test_module.stringTest(without_prints(code))
        except Exception:
            passed = False
    cases = []
    for i in range(1, count + 1):
        if not passed:
            break
        try:
            with open(f"result/result_{i}.pkl", "rb") as fh:
                result = pickle.load(fh)
            passed = test_module.test(result, answers[i - 1]) == 1
        except Exception:
            passed = False
        cases.append(int(bool(passed)))
    report = {"cases": cases, "passed": bool(passed), "exit_codes": exit_codes}
    with os.fdopen(int(os.environ["CODEEVAL_RESULT_FD"]), "ab", closefd=False) as channel:
        channel.write(json.dumps(report).encode() + b"\n")


main()
