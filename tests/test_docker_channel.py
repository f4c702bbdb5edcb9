"""The channel between the host and a sandbox container's server (docker_channel.py): a Unix
socket mounted into the container on a local engine, the attach stream on a remote one."""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time

import pytest
from docker_env import ensure_images, our_containers, unstretched

from codeeval.executors.base import FAILED, PASSED, Program
from codeeval.executors.docker import channel as docker_channel
from codeeval.executors.docker import sandbox as ds

PROGRAMS = [Program("ok", "print('hi')\nassert 1 + 1 == 2"), Program("bad", "assert False"),
            Program("big", "x = " + repr("y" * 300_000) + "\nassert len(x) == 300_000")]


@pytest.fixture(scope="module")
def image():
    return ensure_images()


def _run(workers: int = 2) -> tuple[list, list]:
    with ds.DockerSandbox(n_workers=workers, limits=unstretched()) as sb:
        outcomes = sb.run(PROGRAMS * 3)
        conns = [w.conn for w in sb._workers if w is not None]
    assert not our_containers(sandbox_id=sb.id)
    return outcomes, conns


def test_the_server_answers_on_its_socket_and_no_host_file_is_left(image, tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    outcomes, conns = _run()
    assert [o.status for o in outcomes] == [PASSED, FAILED, PASSED] * 3
    assert outcomes[0].stdout_tail.strip() == "hi"
    assert conns and all(c is not None for c in conns), "the workers fell back to the attach stream"
    assert not list(tmp_path.iterdir()), "a channel directory was left on the host"


def test_a_remote_engine_speaks_on_stdin_and_stdout(image, monkeypatch):
    monkeypatch.setattr(docker_channel, "local_engine", lambda: False)
    outcomes, conns = _run()
    assert [o.status for o in outcomes] == [PASSED, FAILED, PASSED] * 3
    assert conns and all(c is None for c in conns)


def test_a_peer_of_another_uid_is_refused():
    listener = docker_channel.Listener()
    # it enters the directory first: TMPDIR's parents may be closed to other uids (a CI clone's are)
    connect = ("import os, socket, sys, time; os.chdir(sys.argv[1]); os.setgid(12345); os.setuid(12345); "
               "s = socket.socket(socket.AF_UNIX); s.connect('sock'); time.sleep(5)")
    stranger = subprocess.Popen([sys.executable, "-c", connect, listener.dir])
    read_end, write_end = os.pipe()
    try:
        with pytest.raises(PermissionError, match="uid 12345"):
            listener.accept(10000, read_end, time.monotonic() + 10)
    finally:
        stranger.kill()
        stranger.wait()
        listener.close()
        os.close(read_end)
        os.close(write_end)
    assert not os.path.exists(listener.dir)
