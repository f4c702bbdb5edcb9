"""The local subprocess sandbox judges only programs that ran to their end as passed."""
from __future__ import annotations

import re
import textwrap
import time

import pytest

from codeeval.executors.base import Limits, Program
from codeeval.executors.local import LocalSandbox


def run(*programs, **kw):
    return {o.key: o for o in LocalSandbox(n_workers=2, **kw).run(list(programs))}


def P(key, code, timeout=3.0, guard=True):
    return Program(key, textwrap.dedent(code), timeout_s=timeout, guard=guard)


def test_pass_fail_and_output_tails():
    out = run(P("ok", "print('hello')\nassert 1 + 1 == 2"), P("bad", "assert 1 + 1 == 3"))
    assert out["ok"].passed and out["ok"].status == "passed" and out["ok"].stdout_tail == "hello\n"
    assert not out["bad"].passed and out["bad"].status == "failed"
    assert "AssertionError" in out["bad"].stderr_tail


@pytest.mark.parametrize("code", [
    "import os\nos._exit(0)\nassert False",
    "import sys\nsys.exit(0)\nassert False",
    "raise SystemExit(0)",
    "import atexit, os\natexit.register(lambda: os._exit(0))\nassert False",
])
def test_early_exit_or_forged_exit_code_is_a_failure(code):
    out = run(P("x", code, guard=False))["x"]
    assert not out.passed and out.status == "failed"


def test_exit_is_disabled_by_the_bigcode_guard():
    out = run(P("x", "exit(0)"))["x"]
    assert not out.passed and "NoneType" in out.stderr_tail


def test_timeout_kills_the_whole_process_group(tmp_path):
    marker = tmp_path / "child-alive"
    code = f"""
        import subprocess, sys
        subprocess.Popen([sys.executable, "-c", "import time, pathlib\\nwhile True:\\n    pathlib.Path({str(marker)!r}).touch(); time.sleep(0.05)"])
        while True:
            pass
    """
    out = run(P("loop", code, timeout=1.0, guard=False))["loop"]
    assert out.status == "timeout" and not out.passed
    # stopped at its limit of CPU time (the clock the verdict uses; wall time depends on the load),
    # stretched by the slowdown the speed check found where this machine is slower than the reference
    found = re.search(r"\(x([0-9.]+): this machine ran the speed check slower", out.detail)
    slowdown = float(found[1]) if found else 1.0
    assert 1.0 * slowdown <= out.cpu_s < 1.0 * slowdown + 0.5, (out.cpu_s, out.detail)
    time.sleep(0.3)
    marker.unlink(missing_ok=True)
    time.sleep(0.3)
    assert not marker.exists(), "a child of the timed-out program is still running"


def test_stdin_is_closed():
    out = run(P("read", "x = input()"))["read"]
    assert not out.passed and "EOFError" in out.stderr_tail


def test_memory_limit_and_output_cap():
    out = run(P("mem", "x = bytearray(2 * 1024 ** 3)"), limits=Limits(memory_mb=512))["mem"]
    assert not out.passed and "MemoryError" in out.stderr_tail
    flood = run(P("flood", "while True: print('x' * 10000)", timeout=5), limits=Limits(fsize_mb=1))["flood"]
    assert not flood.passed and len(flood.stdout_tail) <= Limits().tail_bytes


def test_environment_is_not_inherited(monkeypatch):
    monkeypatch.setenv("CODEEVAL_SECRET_TOKEN", "s3cret")
    out = run(P("env", "import os\nassert 'CODEEVAL_SECRET_TOKEN' not in os.environ\nassert 'CODEEVAL_NONCE' not in os.environ", guard=False))
    assert out["env"].passed, out["env"].stderr_tail


def test_nonce_is_not_in_the_environment_block():
    # /proc/self/environ keeps the environment the process started with, even after unsetenv.
    code = """
        import re
        environ = open('/proc/self/environ', 'rb').read()
        assert b'CODEEVAL_NONCE_FD=' in environ
        assert not re.search(rb'[0-9a-f]{32}', environ), environ
    """
    out = run(P("env", code, guard=False))["env"]
    assert out.passed, out.stderr_tail


def test_output_files_swapped_for_fifos_are_read_through_descriptors():
    code = """
        import os
        print('before the swap', flush=True)
        for name in ('../stdout', '../stderr'):
            os.unlink(name)
            os.mkfifo(name)
        assert False
    """
    start = time.monotonic()
    out = run(P("fifo", code, guard=False))["fifo"]
    assert out.status == "failed" and out.stdout_tail == "before the swap\n"
    assert time.monotonic() - start < 30  # a reader blocked on a fifo would wait for ever; 30 s holds at any load
