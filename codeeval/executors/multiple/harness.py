"""Runs one MultiPL-E program's compile and run steps inside the sandbox container.

Stdlib only: build() sends this file's text as the sandbox Program's code, followed by a
call `main(<spec>)`. The spec (languages.Language.spec) lists the steps as argv lists with
`{file}` placeholders; the program text is already in the working directory (Program.files).
Each step's exit code and the first 2048 bytes of its stdout and stderr (the reference's
capture size) go back as JSON on the result channel; the host judges them (languages.py).
A compile step that fails stops the program, as in MultiPL-E's eval_<lang>.py.
"""
import json
import os
import signal
import subprocess
import time

CAPTURE = 2048


def _head(path):
    with open(path, "rb") as fh:
        return fh.read(CAPTURE).decode("utf-8", "ignore")


def run_step(argv, env, wall_s, n):
    """One command, its output into files (RLIMIT_FSIZE caps them), its process group killed at the end.
    `wall_s` None: no limit here (the sandbox limits the whole job's CPU time and wall clock)."""
    out, err = f".step{n}.out", f".step{n}.err"
    started = time.monotonic()
    with open(out, "wb") as fo, open(err, "wb") as fe:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=fo, stderr=fe, env=env,
                                start_new_session=True)
        timed_out = False
        try:
            code = proc.wait(timeout=wall_s)
        except subprocess.TimeoutExpired:
            timed_out = True
            code = None
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # leftovers (a compiler's daemon, a forked child)
        except OSError:
            pass
        if timed_out:
            proc.wait()
    return {"argv": argv[0], "exit_code": code, "timed_out": timed_out, "stdout": _head(out), "stderr": _head(err),
            "seconds": round(time.monotonic() - started, 3)}


def main(spec):
    env = dict(os.environ)
    env.update({k: v.replace("{work}", os.getcwd()) for k, v in spec.get("env", {}).items()})
    for d in spec.get("dirs", []):
        os.makedirs(d, exist_ok=True)
    steps = []
    for n, step in enumerate(spec["steps"]):
        argv = [a.replace("{file}", spec["file"]).replace("{stem}", spec["file"].split(".")[0]) for a in step["argv"]]
        result = run_step(argv, env, step["wall_s"], n)
        steps.append(result)
        if result["timed_out"] or (step.get("compile") and result["exit_code"] != 0):
            break
    last = steps[-1]
    print(last["stdout"], end="")
    print(last["stderr"], end="", file=__import__("sys").stderr)
    fd = int(os.environ.get("CODEEVAL_RESULT_FD", "0") or 0)
    if fd:
        os.write(fd, json.dumps({"steps": steps}).encode())
