"""Runs one MultiPL-E program's compile and run steps inside the sandbox container.

Stdlib only: build() sends this file's text as the sandbox Program's code, followed by a
call `main(<spec>)`. The spec (languages.Language.spec) lists the steps as argv lists with
`{file}` placeholders; the program text is already in the working directory (Program.files).
Each step's exit code and the first 2048 bytes of its stdout and stderr (the reference's
capture size) go back as JSON on the result channel; the host judges them (languages.py).
A compile step that fails stops the program, as in MultiPL-E's eval_<lang>.py. A step that
runs past its limit (MultiPL-E's `subprocess` timeout) is killed and `timed_out`: the limit
applies to the step's clock, its wall time less the time its processes waited for a CPU
(cputime.wait_clocked), so that a step that sleeps or blocks times out as there, while a
loaded machine does not time out a slow compiler.
"""
import json
import os
import signal
import subprocess
import time

import cputime  # the sandbox's own (the runner's directory; imported in its server)

CAPTURE = 2048


def _head(path):
    with open(path, "rb") as fh:
        return fh.read(CAPTURE).decode("utf-8", "ignore")


def run_step(argv, env, limit_s, n):
    """One command in a session of its own, its output into files (RLIMIT_FSIZE caps them), its
    process group killed at the end; `limit_s` seconds of its clock."""
    out, err = f".step{n}.out", f".step{n}.err"
    started = time.monotonic()
    with open(out, "wb") as fo, open(err, "wb") as fe:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=fo, stderr=fe, env=env,
                                start_new_session=True)
        ended, clock = cputime.wait_clocked(proc.pid, limit_s)
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # leftovers (a compiler's daemon, a forked child); or the step
        except OSError:
            pass
        status = proc.wait()
        code = status if ended else None
    return {"argv": argv[0], "exit_code": code, "timed_out": not ended, "stdout": _head(out), "stderr": _head(err),
            "seconds": round(time.monotonic() - started, 3), "clock": round(clock, 3)}


def main(spec):
    env = dict(os.environ)
    env.update({k: v.replace("{work}", os.getcwd()) for k, v in spec.get("env", {}).items()})
    for d in spec.get("dirs", []):
        os.makedirs(d, exist_ok=True)
    steps = []
    for n, step in enumerate(spec["steps"]):
        argv = [a.replace("{file}", spec["file"]).replace("{stem}", spec["file"].split(".")[0]) for a in step["argv"]]
        result = run_step(argv, env, step["limit_s"], n)
        steps.append(result)
        if result["timed_out"] or (step.get("compile") and result["exit_code"] != 0):
            break
    last = steps[-1]
    print(last["stdout"], end="")
    print(last["stderr"], end="", file=__import__("sys").stderr)
    fd = int(os.environ.get("CODEEVAL_RESULT_FD", "0") or 0)
    if fd:
        os.write(fd, json.dumps({"steps": steps}).encode())
