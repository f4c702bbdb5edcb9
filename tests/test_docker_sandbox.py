"""The Docker sandbox, run for real: images, statuses, limits, retries, clean-up, HumanEval."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest
from docker_env import (
    REPO,
    container_ids,
    ensure_images,
    humaneval_programs,
    our_containers,
    processes_in,
    unstretched,
)

from codeeval.executors import open_sandbox
from codeeval.executors.base import FAILED, PASSED, SANDBOX_ERROR, TIMEOUT, Limits, Program
from codeeval.executors.docker import sandbox as ds
from codeeval.executors.docker import images


@pytest.fixture(scope="module")
def image():
    return ensure_images()


@pytest.fixture(scope="module")
def sandbox(image):
    with ds.DockerSandbox(n_workers=2, limits=unstretched()) as sb:
        yield sb
    assert not our_containers(sandbox_id=sb.id)


def test_build_is_idempotent_and_tags_with_the_recipe_hash(image):
    started = time.monotonic()
    done = subprocess.run(["bash", "codeeval/containers/build.sh"], cwd=REPO, capture_output=True, text=True, check=True)
    assert time.monotonic() - started < 5
    assert "up to date" in done.stderr and image in done.stderr
    label = subprocess.run(["docker", "image", "inspect", "--format", '{{index .Config.Labels "codeeval.recipe"}}',
                            image], capture_output=True, text=True, check=True).stdout.strip()
    assert label == image
    # The tag is a hash of what goes into the image: a changed server changes it.
    assert image.split(":")[1] == images._digest(images.PYTHON_FILES, images.packages_image())
    assert images._digest(images.PYTHON_FILES, "other-base") != image.split(":")[1]


def test_factory_opens_docker_by_default(image):
    from codeeval.executors import SandboxSpec

    assert SandboxSpec().name == "docker"
    with open_sandbox(SandboxSpec(n_workers=1)) as sb:
        assert isinstance(sb, ds.DockerSandbox)
        [outcome] = sb.run([Program("one", "assert 1 + 1 == 2")])
    assert outcome.status == PASSED


def test_missing_image_is_a_clear_error(image):
    with pytest.raises(ds.SandboxUnavailable, match="make images"):
        ds.DockerSandbox(n_workers=1, image="codeeval-python:does-not-exist")


def test_statuses_and_output(sandbox):
    programs = [
        Program("pass", "print('hello')\nimport sys\nprint('warn', file=sys.stderr)\nassert 1 + 1 == 2"),
        Program("fail", "assert 1 + 1 == 3, 'arithmetic'"),
        Program("syntax", "def f(:\n  pass"),
        Program("timeout", "while True:\n    pass", timeout_s=1.0, clock_s=2.0),  # the CPU limit comes first
        Program("exit0", "import os\nos._exit(0)", guard=False),
        Program("guarded", "import os\nos.system('true')"),  # the reliability guard disables os.system
        Program("numpy", "import numpy as np\nassert np.arange(4).sum() == 6", guard=False),
        Program("cwd", "import os, pathlib\npathlib.Path('f.txt').write_text('x')\nassert os.getcwd() == '/tmp/work'",
                guard=False),
        # compiled as a fresh interpreter would: no __future__ flag leaks in from the sandbox's code
        Program("annotations", "def f(x: int): pass\nassert f.__annotations__ == {'x': int}, f.__annotations__"),
        # compile-time warnings reach the program's stderr
        Program("warning", "x = 1\nassert (x is 1) or True"),
    ]
    out = {o.key: o for o in sandbox.run(programs)}
    assert out["annotations"].status == PASSED, out["annotations"].stderr_tail
    assert out["warning"].status == PASSED and "SyntaxWarning" in out["warning"].stderr_tail
    assert out["pass"].status == PASSED and out["pass"].passed and out["pass"].exit_code == 0
    assert out["pass"].stdout_tail == "hello\n" and out["pass"].stderr_tail == "warn\n"
    assert out["fail"].status == FAILED and "AssertionError: arithmetic" in out["fail"].stderr_tail
    assert out["syntax"].status == FAILED and "SyntaxError" in out["syntax"].stderr_tail
    assert out["timeout"].status == TIMEOUT and not out["timeout"].passed
    assert out["timeout"].detail == "CPU time limit 1s exceeded" and out["timeout"].cpu_s > 1.0
    assert out["exit0"].status == FAILED and out["exit0"].exit_code == 0
    assert "no completion marker" in out["exit0"].detail
    assert out["guarded"].status == FAILED
    assert out["numpy"].status == PASSED, out["numpy"].stderr_tail
    assert out["cwd"].status == PASSED, out["cwd"].stderr_tail


def test_output_tail_is_capped(image):
    with ds.DockerSandbox(n_workers=1, limits=Limits(tail_bytes=100)) as sb:
        [o] = sb.run([Program("big", "print('a' * 100000 + 'END')")])
    assert o.status == PASSED and len(o.stdout_tail) == 100 and o.stdout_tail.endswith("END\n")


def test_scratch_is_wiped_and_processes_killed_between_programs(image):
    leave = textwrap.dedent("""
        import os, subprocess
        open('left.txt', 'w').write('x')
        open('/tmp/left.txt', 'w').write('x')
        open('/dev/shm/left.txt', 'w').write('x')
        subprocess.Popen(['sleep', '60'])
    """)
    check = textwrap.dedent("""
        import os
        assert os.listdir('.') == [], os.listdir('.')
        assert os.listdir('/tmp') == ['work'], os.listdir('/tmp')
        assert sorted(os.listdir('/out')) == ['result', 'stderr', 'stdout'], os.listdir('/out')
        assert os.listdir('/dev/shm') == [], os.listdir('/dev/shm')
        others = [p for p in os.listdir('/proc') if p.isdigit() and int(p) not in (1, os.getpid())]
        assert others == [], others
    """)
    with ds.DockerSandbox(n_workers=1) as sb:  # one container: the second program runs where the first did
        a, b = sb.run([Program("leave", leave, guard=False), Program("check", check, guard=False)])
    assert a.status == PASSED, a.stderr_tail
    assert b.status == PASSED, b.stderr_tail


def test_containers_are_locked_down(sandbox):
    sandbox.start()
    names = [w.name for w in sandbox._workers if w is not None]
    assert len(names) == 2
    info = json.loads(subprocess.run(["docker", "inspect", *names], capture_output=True, text=True, check=True).stdout)
    uids = set()
    for c in info:
        host = c["HostConfig"]
        assert host["NetworkMode"] == "none"
        assert host["ReadonlyRootfs"] is True
        assert host["CapDrop"] == ["ALL"] or "ALL" in host["CapDrop"]
        assert "no-new-privileges" in host["SecurityOpt"]
        assert host["PidsLimit"] == Limits().nproc + 16
        assert host["Memory"] == host["MemorySwap"] > 0
        assert host["NanoCpus"] == 1_000_000_000
        assert "size=256m" in host["Tmpfs"]["/tmp"]
        user = c["Config"]["User"]
        assert not user.startswith("0") and user != "root"
        uids.add(user)
        assert c["Config"]["Labels"]["codeeval.owner"] == sandbox.owner
    assert len(uids) == 2  # one uid per slot
    # Processes are bounded by --pids-limit; RLIMIT_NPROC (per uid, host-wide) is not lowered.
    [o] = sandbox.run([Program("nproc", "import resource\n"
                               "assert resource.getrlimit(resource.RLIMIT_NPROC)[0] != 64", guard=False)])
    assert o.status == PASSED, o.stderr_tail


def test_large_program_is_sent_whole(sandbox):
    code = "x = 1\n" + "# padding\n" * 300_000 + "assert x == 1\nprint('end')"  # 3 MB: many pipe buffers
    [o] = sandbox.run([Program("large", code)])
    assert o.status == PASSED and o.stdout_tail == "end\n", (o.status, o.stderr_tail)


def slow_container_start(monkeypatch, seconds: float) -> None:
    original = ds._Worker.__init__

    def slow_start(self, sandbox, slot):
        time.sleep(seconds)
        original(self, sandbox, slot)

    monkeypatch.setattr(ds._Worker, "__init__", slow_start)


def test_container_start_is_not_charged_to_the_first_program(image, monkeypatch):
    """The deadline of a program starts when it is sent, not when its container is started."""
    slow_container_start(monkeypatch, 2.0)
    with ds.DockerSandbox(n_workers=1, container=ds.ContainerLimits(grace_s=1.0)) as sb:
        [o] = sb.run([Program("first", "pass", timeout_s=0.5)])
    assert o.status == PASSED, o.detail


def test_answer_already_there_at_the_deadline_is_taken():
    worker = ds._Worker.__new__(ds._Worker)
    r, w = os.pipe()
    try:
        os.write(w, b"abcd")
        worker.rfd = r
        assert worker._read_exact(4, time.monotonic() - 1) == b"abcd"
    finally:
        os.close(r)
        os.close(w)


def test_close_while_a_container_starts_leaves_nothing(image, monkeypatch):
    slow_container_start(monkeypatch, 1.0)
    sb = ds.DockerSandbox(n_workers=1)
    starter = threading.Thread(target=sb.start)
    starter.start()
    time.sleep(0.3)
    sb.close()  # before the container exists; it must remove itself once started
    starter.join(60)
    assert sb._workers == [None]
    assert not our_containers(sandbox_id=sb.id)


def _kill_container_on(keys, every_attempt):
    """Wrap _Worker.receive: kill the container (for real) while it runs one of `keys`."""
    original = ds._Worker.receive
    seen = set()

    def receive(self, program, since):
        if program.key in keys and (every_attempt or program.key not in seen):
            seen.add(program.key)
            subprocess.run(["docker", "kill", self.name], capture_output=True)
        return original(self, program, since)

    return receive


def test_dead_container_is_replaced_and_the_program_retried(image, monkeypatch):
    monkeypatch.setattr(ds._Worker, "receive", _kill_container_on({"victim"}, every_attempt=False))
    with ds.DockerSandbox(n_workers=1) as sb:
        out = sb.run([Program("before", "pass"), Program("victim", "import time\ntime.sleep(0.5)"), Program("after", "pass"),
                      Program("last", "pass")])
    assert [o.status for o in out] == [PASSED, PASSED, PASSED, PASSED]


def test_container_dying_twice_is_a_sandbox_error_not_a_failure(image, monkeypatch):
    monkeypatch.setattr(ds._Worker, "receive", _kill_container_on({"victim"}, every_attempt=True))
    with ds.DockerSandbox(n_workers=1) as sb:
        out = sb.run([Program("before", "pass"), Program("victim", "import time\ntime.sleep(0.5)"), Program("after", "pass")])
    assert out[1].status == SANDBOX_ERROR and not out[1].passed and out[1].exit_code is None
    assert "sandbox error" in out[1].detail and "then" in out[1].detail
    assert out[0].status == PASSED and out[2].status == PASSED


CHILD = textwrap.dedent("""
    import sys, time
    from codeeval.executors.base import Program
    from codeeval.executors.docker.sandbox import DockerSandbox
    sb = DockerSandbox(n_workers=2)
    sb.start()
    print(sb.owner, flush=True)
    sb.run([Program("sleep", "import time\\ntime.sleep(60)", timeout_s=60),
            Program("sleep2", "import time\\ntime.sleep(60)", timeout_s=60)])
""")


def _start_child():
    proc = subprocess.Popen([sys.executable, "-c", CHILD], stdout=subprocess.PIPE, text=True, cwd=REPO)
    owner = proc.stdout.readline().strip()
    assert owner, "the child did not start its sandbox"
    deadline = time.monotonic() + 20
    while len(our_containers(owner)) < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    names = our_containers(owner)
    assert len(names) == 2
    time.sleep(0.5)  # the programs are running
    return proc, owner, container_ids(names)


def _wait_gone(owner, ids, seconds):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not our_containers(owner) and not processes_in(ids):
            return True
        time.sleep(0.2)
    return False


def test_ctrl_c_removes_the_containers(image):
    proc, owner, ids = _start_child()
    proc.send_signal(signal.SIGINT)
    proc.wait(timeout=30)
    assert _wait_gone(owner, ids, 10), our_containers(owner)


def test_crashed_run_is_cleaned_up_on_the_next_start(image):
    proc, owner, ids = _start_child()
    proc.kill()  # SIGKILL: no clean-up code runs in the child
    proc.wait()
    with ds.DockerSandbox(n_workers=1):  # the next start sweeps containers whose owner is gone
        assert not our_containers(owner)
    assert _wait_gone(owner, ids, 10)


def test_humaneval_canonical_solutions_all_pass(sandbox):
    programs = humaneval_programs()
    assert len(programs) == 164
    outcomes = sandbox.run(programs)
    failed = [(o.key, o.status, o.stderr_tail[-300:]) for o in outcomes if not o.passed]
    assert not failed
    assert sum(o.status == PASSED for o in outcomes) == 164


def test_broken_image_fails_the_run_loudly(image):
    """Containers that cannot even start make the run fail, not every sample a sandbox error."""
    with ds.DockerSandbox(n_workers=2, image=images.base_image()) as sb:  # the base image has no server
        with pytest.raises(ds.SandboxUnavailable, match="failed to start"):
            sb.run([Program(f"p{i}", "pass") for i in range(20)])
    assert not our_containers(sandbox_id=sb.id)
