"""Running a repository's tests: in the execution image with the repository mounted (Docker,
through the SDK: the engine of DOCKER_HOST / the docker context), or as a host process (local, development only). Both go through guard.py, which enforces the
reference's time limit and kills the whole process tree."""
from __future__ import annotations

import os
import subprocess
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

GUARD = Path(__file__).with_name("guard.py")
TIMED_OUT = 124
TAIL = 2048


@dataclass(frozen=True)
class TestRun:
    __test__ = False  # not a pytest test class
    exit_code: Optional[int]
    timed_out: bool
    duration_s: float
    output: str  # stdout and stderr, merged, the tail


@dataclass(frozen=True)
class TestRunner:
    """How test commands run. `kind`: "docker" or "local"."""

    __test__ = False

    kind: str = "docker"
    image: str = ""
    memory_mb: int = 5120  # EvoCodeBench's 5 GB RSS check, as the container's memory limit
    pids: int = 512
    container_runtime: str = ""  # the sandbox's OCI runtime (runsc: gVisor); "" = the engine's default

    def run(self, project_dir: Path, project_path: str, env_dir: Path, args: Sequence[str],
            timeout_s: float) -> TestRun:
        """`python -m pytest ARGS` with cwd = the project. The environment is the interpreter's
        user site (PYTHONUSERBASE): on sys.path after the standard library, so that no package
        of the project's shadows a stdlib module, and its .pth files are processed."""
        pytest = ["-m", "pytest", "-p", "no:cacheprovider", *args]
        if self.kind == "local":
            env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONNOUSERSITE")}
            env.update(PYTHONUSERBASE=str(env_dir), PYTHONDONTWRITEBYTECODE="1")
            cmd = ["python3", "-B", str(GUARD), str(timeout_s), "python3", *pytest]
            return _run(cmd, project_dir, env, timeout_s)
        workdir = f"/src/{project_path}"
        flags = ["-e", "PYTHONUSERBASE=/env", "-e", "PYTHONDONTWRITEBYTECODE=1",
                 "-v", f"{env_dir}:/env:ro", "-v", f"{project_dir}:{workdir}", "-w", workdir]
        return self._container(["python3", *pytest], flags, timeout_s)

    def tool(self, argv: Sequence[str], mounts: dict[str, tuple[Path, bool]], timeout_s: float) -> TestRun:
        """A build step (building a wheel, asking the interpreter its stdlib) where the tests run:
        in the execution image, offline, `mounts` = {container path: (host path, writable)}; or,
        local kind, on the host with the container paths replaced by the host ones."""
        if self.kind == "local":
            def host(arg: str) -> str:
                for inside, (outside, _) in mounts.items():
                    arg = arg.replace(inside, str(outside))
                return arg
            return _run(["python3", "-B", str(GUARD), str(timeout_s), *map(host, argv)], None,
                        {**os.environ, "HOME": os.environ.get("HOME", "/tmp")}, timeout_s)
        flags = [f for inside, (outside, rw) in mounts.items() for f in ("-v", f"{outside}:{inside}" + ("" if rw else ":ro"))]
        return self._container(list(argv), flags, timeout_s)

    def _container(self, argv: list[str], extra: list[str], timeout_s: float) -> TestRun:
        name = f"codeeval-repo-{uuid.uuid4().hex[:12]}"
        from codeeval.executors.docker import runtimes
        from codeeval.executors.docker.owners import LABEL, OWNER_LABEL, _owner_id

        # the sandbox's labels: any codeeval run's sweep removes it once this process is gone
        flags = ["--label", f"{LABEL}=repo", "--label", f"{OWNER_LABEL}={_owner_id()}",
                 "--network", "none", "--read-only", "--tmpfs", "/tmp:rw,exec,size=512m",
                 "--memory", f"{self.memory_mb}m", "--memory-swap", f"{self.memory_mb}m",
                 "--pids-limit", str(runtimes.pids_limit(self.pids, self.container_runtime)),
                 "--cap-drop", "ALL", "--security-opt", "no-new-privileges",
                 "--user", f"{os.getuid()}:{os.getgid()}", "-e", "HOME=/tmp",
                 "-v", f"{GUARD}:/opt/codeeval-repo/guard.py:ro",
                 *(["--runtime", self.container_runtime] if self.container_runtime else []), *extra]
        command = ["python3", "-B", "/opt/codeeval-repo/guard.py", str(timeout_s), *argv]
        return _run_container(self.image, command, flags, name, timeout_s)


def _run_container(image: str, command: list[str], flags: list[str], name: str, timeout_s: float) -> TestRun:
    """The tests in a container through the Docker SDK. Its stdin stays attached while they run:
    guard.py kills everything when it closes (we died). Not auto-removed, so that its exit code
    can be read however fast it exits; removed here, or by the next sweep if we die."""
    from codeeval.executors.docker import engine, starts
    from codeeval.executors.docker.attached import Attached, StartFailed

    started = time.monotonic()
    try:
        client = engine.connect()
    except engine.SandboxUnavailable as exc:
        return TestRun(125, False, time.monotonic() - started, f"codeeval: {exc}")
    try:
        try:
            with starts.turn():
                box = Attached(client, image, command, flags, name, merge_stderr=True, auto_remove=False)
        except StartFailed as exc:  # 125: what `docker run` exits with when it cannot start the container
            return TestRun(125, False, time.monotonic() - started, f"codeeval: {exc}")
        chunks: list[bytes] = []
        reader = threading.Thread(target=lambda: chunks.extend(iter(lambda: os.read(box.stdout_fd, 65536), b"")),
                                  daemon=True)
        reader.start()
        try:  # guard.py enforces timeout_s; this backstop only catches a runner that hangs itself
            code = box.wait(timeout_s + 60)
            if code is None:
                box.kill()
            reader.join(10)
        finally:
            box.close_stdin()
            box.remove()
    finally:
        client.close()
    out = _tail(b"".join(chunks))
    if code is None:
        return TestRun(None, True, time.monotonic() - started, out + "\ncodeeval: runner backstop expired")
    return TestRun(code, code == TIMED_OUT, time.monotonic() - started, out)


def _run(cmd: list[str], cwd: Optional[Path], env: Optional[dict], timeout_s: float) -> TestRun:
    """The tests as a host process (local kind)."""
    started = time.monotonic()
    # stdin stays open while the tests run: guard.py kills everything when it closes (we died)
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, start_new_session=True)
    chunks: list[bytes] = []
    reader = threading.Thread(target=lambda: chunks.extend(iter(lambda: proc.stdout.read(65536), b"")), daemon=True)
    reader.start()
    try:
        # guard.py enforces timeout_s; this backstop only catches a runner that hangs itself
        code = proc.wait(timeout=timeout_s + 60)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
        proc.wait()
        code = None
    finally:
        proc.stdin.close()
    reader.join(10)
    out = _tail(b"".join(chunks))
    if code is None:
        return TestRun(None, True, time.monotonic() - started, out + "\ncodeeval: runner backstop expired")
    return TestRun(code, code == TIMED_OUT, time.monotonic() - started, out)


def _tail(data: bytes) -> str:
    return data[-TAIL:].decode("utf-8", "replace")
