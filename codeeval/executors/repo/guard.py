"""Runs one test command with a time limit and kills its whole process tree (stdlib only).

It is the container's PID 1 (the Docker runner) or a host process in its own session (the
local runner). The command runs in a new process group; when it ends, times out, or the
harness goes away (stdin closes), the whole group is SIGKILLed, so a stubborn pytest
grandchild cannot outlive its test (the references kill only the bash parent). In a
container, PID 1 exiting also ends every process that escaped the group.

Usage: guard.py TIMEOUT_S CMD...   Exit status: the command's, or 124 when it timed out.
"""
import os
import signal
import subprocess
import sys
import threading


def main() -> int:
    timeout = float(sys.argv[1])
    child = subprocess.Popen(sys.argv[2:], start_new_session=True, stdin=subprocess.DEVNULL)

    def kill_group() -> None:
        try:
            os.killpg(child.pid, signal.SIGKILL)
        except OSError:
            pass

    def watch_stdin() -> None:  # the harness died or gave up: stop everything
        try:
            while os.read(0, 4096):
                pass
        except OSError:
            pass
        kill_group()
        os.write(2, b"codeeval: the harness closed the test's stdin; process group killed\n")
        os._exit(137)

    threading.Thread(target=watch_stdin, daemon=True).start()
    try:
        code = child.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_group()
        child.wait()
        sys.stdout.flush()
        print(f"\ncodeeval: test command timed out after {timeout:g}s; process group killed", file=sys.stderr)
        return 124
    kill_group()  # whatever the tests left running in their group
    return code


if __name__ == "__main__":
    sys.exit(main())
