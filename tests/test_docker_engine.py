"""The sandbox drives whichever engine DOCKER_HOST / the docker context names (Docker SDK), and
an engine it cannot reach is one line within seconds, before a run and during one.

"Another engine" is the real engine behind a second address: a socket forwarder in this
process (EngineProxy) that can be cut mid-run, as a remote engine's host or network fails.
"""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import docker
import pytest
from docker_env import ensure_images

from codeeval.executors.base import PASSED, Program
from codeeval.executors.docker import sandbox as ds
from codeeval.executors.docker import engine
from codeeval.executors.docker.flags import create_args

LOCAL = "/var/run/docker.sock"
UNREACHABLE = ["unix:///nonexistent/docker.sock", "tcp://127.0.0.1:9"]


class EngineProxy:
    """A unix socket at `path` that forwards every connection to the local engine, half-closes
    included (they carry a container's stdin EOF). close() cuts every connection at once."""

    def __init__(self, path: Path):
        self.path = str(path)
        self.listener = socket.socket(socket.AF_UNIX)
        self.listener.bind(self.path)
        self.listener.listen(64)
        self.sockets: list[socket.socket] = []
        self.connections = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            upstream = socket.socket(socket.AF_UNIX)
            upstream.connect(LOCAL)
            self.sockets += [client, upstream]
            self.connections += 1
            for src, dst in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(src, dst), daemon=True).start()

    @staticmethod
    def _pipe(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass

    def close(self) -> None:
        for s in [self.listener, *self.sockets]:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()
        os.unlink(self.path)


@pytest.fixture(scope="module")
def image():
    return ensure_images()


@pytest.fixture
def proxy():
    # a socket's path has at most 107 bytes: pytest's temp dirs (under a clone's TMPDIR, an xdist
    # worker's folder) can be longer, so it lives in a short folder of its own, removed after
    folder = tempfile.mkdtemp(prefix="ce-", dir="/dev/shm" if os.access("/dev/shm", os.W_OK) else None)
    p = EngineProxy(Path(folder) / "engine.sock")
    yield p
    if os.path.exists(p.path):
        p.close()
    shutil.rmtree(folder, ignore_errors=True)


def our_containers(sandbox_id: str) -> list[str]:
    """The sandbox's containers on the local engine, asked at its socket (not DOCKER_HOST's)."""
    api = docker.APIClient(base_url=f"unix://{LOCAL}")
    try:
        return [c["Names"][0] for c in api.containers(all=True, filters={"label": f"codeeval.sandbox={sandbox_id}"})]
    finally:
        api.close()


PROGRAMS = [Program("ok", "print(sum(range(10)))"), Program("stderr", "import sys; sys.exit('boom')")]


def _check(outcomes) -> None:
    ok, bad = outcomes
    assert ok.status == PASSED and ok.stdout_tail == "45\n"
    assert not bad.passed and "boom" in bad.stderr_tail


def test_docker_host_given_explicitly(image, monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", f"unix://{LOCAL}")
    assert engine.engine_url() == f"unix://{LOCAL}"
    with ds.DockerSandbox(n_workers=2) as sb:
        _check(sb.run(PROGRAMS))
        assert len(our_containers(sandbox_id=sb.id)) == 2
    assert not our_containers(sandbox_id=sb.id)


def test_another_engine_address_and_losing_it_mid_run(image, proxy, monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", f"unix://{proxy.path}")
    sb = ds.DockerSandbox(n_workers=2)
    try:
        _check(sb.run(PROGRAMS))
        assert proxy.connections >= 3  # the API calls and both containers' streams went through it
        assert len(our_containers(sandbox_id=sb.id)) == 2
        proxy.close()  # the engine's host is gone: streams cut, no new connection possible
        # the running containers still answer on their sockets (docker_channel.py) ...
        _check(sb.run(PROGRAMS))
        local = docker.APIClient(base_url=f"unix://{LOCAL}")
        try:  # ... until they die (asked at the local engine, not DOCKER_HOST's): none can replace them
            for name in our_containers(sandbox_id=sb.id):
                local.kill(name.lstrip("/"))
        finally:
            local.close()
        started = time.monotonic()
        with pytest.raises(ds.SandboxUnavailable) as failure:
            sb.run([Program(f"p{i}", "pass") for i in range(20)])
        assert time.monotonic() - started < 20
        message = str(failure.value)
        assert "\n" not in message and proxy.path in message and "failed to start" in message, message
    finally:
        sb.close()
    # killed, they were removed by the engine itself (auto-remove)
    deadline = time.monotonic() + 15
    while our_containers(sandbox_id=sb.id) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not our_containers(sandbox_id=sb.id)


@pytest.mark.parametrize("address", UNREACHABLE)
def test_unreachable_engine_is_one_line_within_seconds(address, monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", address)
    started = time.monotonic()
    with pytest.raises(ds.SandboxUnavailable) as failure:
        ds.DockerSandbox(n_workers=1)
    assert time.monotonic() - started < 5
    message = str(failure.value)
    assert "\n" not in message and address in message and "DOCKER_HOST" in message, message


def test_unreachable_engine_stops_the_cli_before_it_starts(data_dir):
    env = {**os.environ, "DOCKER_HOST": UNREACHABLE[0]}
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "codeeval", "run", "--model", "reference", "--tasks", "humaneval",
                           "--allow_code_execution", "--data-dir", str(data_dir)],
                          env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and f"the Docker engine does not answer at {UNREACHABLE[0]}" in lines[0], done.stderr
    assert time.monotonic() - started < 60


def _use_context(tmp_path, monkeypatch, host: str) -> None:
    """A docker context made by the docker CLI in a private config dir, made current."""
    monkeypatch.delenv("DOCKER_HOST", raising=False)
    monkeypatch.delenv("DOCKER_CONTEXT", raising=False)
    config = tmp_path / "docker-config"
    config.mkdir(exist_ok=True)
    (config / "config.json").write_text("{}")
    monkeypatch.setenv("DOCKER_CONFIG", str(config))
    for args in (["context", "create", "codeeval-test", "--docker", f"host={host}"], ["context", "use", "codeeval-test"]):
        done = subprocess.run(["docker", *args], capture_output=True, text=True, env=os.environ.copy())
        assert done.returncode == 0, done.stderr


def test_the_current_docker_context_is_the_engine(image, proxy, tmp_path, monkeypatch):
    _use_context(tmp_path, monkeypatch, f"unix://{proxy.path}")
    assert engine.engine_url() == f"unix://{proxy.path}"
    before = proxy.connections
    with ds.DockerSandbox(n_workers=1) as sb:
        _check(sb.run(PROGRAMS))
    assert proxy.connections > before


def test_a_docker_context_naming_no_engine_is_one_line(tmp_path, monkeypatch):
    _use_context(tmp_path, monkeypatch, UNREACHABLE[0])
    with pytest.raises(ds.SandboxUnavailable, match="does not answer at unix:///nonexistent/docker.sock"):
        ds.DockerSandbox(n_workers=1)


def test_run_flags_become_the_create_body():
    config, host = create_args(["--tmpfs", "/tmp:rw,size=8m", "--memory", "300m", "--cpus", "1.5", "--read-only",
                                "-v", "/a:/b:ro", "-e", "X=1", "--ulimit", "core=0", "--user", "10000:10000"])
    assert host["tmpfs"] == {"/tmp": "rw,size=8m"} and host["mem_limit"] == 300 * 2 ** 20
    assert host["nano_cpus"] == 1_500_000_000 and host["read_only"] is True
    assert host["binds"] == {"/a": {"bind": "/b", "mode": "ro"}} and config["volumes"] == ["/b"]
    assert config["environment"] == ["X=1"] and config["user"] == "10000:10000"
    assert host["ulimits"][0]["Soft"] == 0
    with pytest.raises(ValueError, match="--privileged"):  # never dropped silently
        create_args(["--privileged"])
