"""A program's two limits, for real, in both sandboxes (and in the Docker server's /proc
fall-back): a CPU burner stops at its CPU limit, a sleeper at its clock limit (wall time less the
time spent waiting for a CPU), CPU waits count against neither, a slow machine stretches only the
CPU, and the reference solutions keep their verdicts while every core is busy."""
from __future__ import annotations

import dataclasses

import pytest
from docker_env import busy_cores, ensure_images, humaneval_programs, mbpp_programs, one_crowded_cpu, unstretched

from codeeval.executors.base import PASSED, TIMEOUT, Program
from codeeval.executors.docker import sandbox as ds
from codeeval.executors.local import LocalSandbox

CPU_DETAIL = "CPU time limit 1s exceeded"
CLOCK_DETAIL = ("time limit {:g}s exceeded (wall clock less the time spent waiting for a CPU: the program ran, "
                "slept or blocked that long)")
# Stopped by the sandbox's own reading of the tree's CPU: RLIMIT_CPU (per process, 9 s
# here) or the clock would stop these later, with more CPU used.
PRECISE_CPU_S = 1.5

PROGRAMS = [
    # clock_s 2: the CPU limit (1 s) is the one that ends a program that only computes
    Program("loop", "while True:\n    pass", timeout_s=1.0, clock_s=2.0),
    Program("sleep", "import time\ntime.sleep(3600)", timeout_s=1.0),
    Program("sleep-clock-2s", "import time\ntime.sleep(3600)", timeout_s=1.0, clock_s=2.0),
    # 2 s of sleep under a 1 s CPU limit and a 3 s clock limit: sleeping uses no CPU.
    Program("sleep-then-work", "import time\ntime.sleep(2)\nassert sum(range(10 ** 5)) == 4999950000",
            timeout_s=1.0, clock_s=3.0),
    # The program waits; its child burns the CPU.
    Program("busy-child", "import subprocess, sys\nsubprocess.run([sys.executable, '-c', 'while True: pass'])",
            timeout_s=1.0, clock_s=2.0, guard=False),
]


CGROUP_COUNTERS = ("/sys/fs/cgroup/cpuacct/cpuacct.usage", "/sys/fs/cgroup/cpu,cpuacct/cpuacct.usage",
                   "/sys/fs/cgroup/cpu.stat")


@pytest.fixture(scope="module", params=["docker", "docker-without-cgroup", "local"])
def sandbox_run(request):
    """(the sandbox's name, its outcomes of PROGRAMS by key, the CPU clocks its servers use)."""
    if request.param == "local":
        sandbox = LocalSandbox(n_workers=2, limits=unstretched())
    else:
        ensure_images()
        sandbox = ds.DockerSandbox(n_workers=2, limits=unstretched())
        if request.param == "docker-without-cgroup":  # hides the counters: the server sums /proc
            sandbox.run_flags += ["--tmpfs", "/sys/fs/cgroup:ro"]
    with sandbox:
        clocks = set()
        if isinstance(sandbox, ds.DockerSandbox):
            sandbox.start()
            clocks = {w.hello["cpu_clock"] for w in sandbox._workers}
        return request.param, {o.key: o for o in sandbox.run(PROGRAMS)}, clocks


@pytest.fixture
def outcomes(sandbox_run):
    return sandbox_run[1]


def test_infinite_loop_stops_at_its_cpu_limit(outcomes):
    o = outcomes["loop"]
    assert (o.status, o.detail) == (TIMEOUT, CPU_DETAIL)
    assert 1.0 < o.cpu_s < PRECISE_CPU_S


def test_sleep_stops_at_its_clock_limit(outcomes):
    default, longer = outcomes["sleep"], outcomes["sleep-clock-2s"]
    assert (default.status, default.detail) == (TIMEOUT, CLOCK_DETAIL.format(1.0))
    assert (longer.status, longer.detail) == (TIMEOUT, CLOCK_DETAIL.format(2.0))
    assert default.cpu_s < 1.0 and longer.cpu_s < 1.0
    assert 1.0 <= default.duration_s < longer.duration_s


def test_sleeping_counts_against_the_clock_only(outcomes):
    o = outcomes["sleep-then-work"]
    assert o.status == PASSED, (o.detail, o.stderr_tail)
    assert o.cpu_s < 1.0


def test_a_child_burning_cpu_counts(outcomes):
    o = outcomes["busy-child"]
    assert (o.status, o.detail) == (TIMEOUT, CPU_DETAIL)
    assert 1.0 < o.cpu_s < PRECISE_CPU_S


def test_docker_reads_the_container_cgroup_else_proc(sandbox_run):
    name, _, clocks = sandbox_run
    if name == "docker":
        assert len(clocks) == 1 and clocks <= set(CGROUP_COUNTERS), clocks
    elif name == "docker-without-cgroup":
        assert clocks == {"/proc"}
    else:
        assert name == "local" and not clocks  # no server: the process group's /proc times


@pytest.mark.parametrize("kind", ["docker", "local"])
def test_a_slow_machine_stretches_the_cpu_limit(kind):
    """A machine slower than the reference (here: any machine, against a reference of 1 ns)
    gives a program that reaches its limit up to MAX_SLOWDOWN times the CPU; a faster one (a
    reference of 1e9 s) never does."""
    from codeeval.executors.base import Limits
    from codeeval.executors.cputime import MAX_SLOWDOWN

    # `work` has a 1 s clock limit too: its clock counts its CPU seconds at the reference speed.
    work = Program("work", "import time\nt = time.process_time()\nwhile time.process_time() - t < 1.5:\n    pass",
                   timeout_s=1.0)
    loop = Program("loop", "while True:\n    pass", timeout_s=1.0, clock_s=2.0)
    # sleeping is never stretched (nor is the speed check run: the CPU used could not explain it)
    sleep = Program("sleep", "import time\ntime.sleep(1.5)", timeout_s=1.0)
    results = {}
    for name, limits in (("slow", Limits(speed_reference_s=1e-9)), ("fast", unstretched())):
        if kind == "docker":
            ensure_images()
            box = ds.DockerSandbox(n_workers=3, limits=limits)
        else:
            box = LocalSandbox(n_workers=3, limits=limits)
        with box:
            results[name] = {o.key: o for o in box.run([work, loop, sleep])}
    slow, fast = results["slow"], results["fast"]
    assert slow["work"].status == PASSED, slow["work"].detail
    assert slow["loop"].status == TIMEOUT and slow["loop"].detail == (
        f"{CPU_DETAIL} (x{MAX_SLOWDOWN:.2f}: this machine ran the speed check slower than the reference)")
    assert MAX_SLOWDOWN < slow["loop"].cpu_s < MAX_SLOWDOWN + 0.5
    assert (slow["sleep"].status, slow["sleep"].detail) == (TIMEOUT, CLOCK_DETAIL.format(1.0))
    assert fast["work"].status == TIMEOUT and fast["work"].detail in (CPU_DETAIL, CLOCK_DETAIL.format(1.0))


def test_docker_cpu_cannot_outgrow_the_wall_clock():
    """--cpus 1: the server need not read the CPU before the wall clock reaches the limit."""
    ensure_images()
    with ds.DockerSandbox(n_workers=1) as sb:
        sb.start()
        assert sb._workers[0].hello["cpu_rate"] == 1.0


def test_reference_verdicts_hold_while_every_core_is_busy():
    """MBPP's task 123 needs most of its 3 s; with a wall-clock limit it timed out on a busy
    machine. Under CPU limits bigcode's oracle verdicts hold with every core taken."""
    ensure_images()
    mbpp = mbpp_programs()
    with_setup = [dataclasses.replace(p, key=f"setup/{p.key}") for p in mbpp_programs(setup=True)]
    humaneval = humaneval_programs()
    assert (len(mbpp), len(with_setup), len(humaneval)) == (500, 500, 164)
    with busy_cores() as hogs:
        with ds.DockerSandbox() as sb:  # the default: one worker per core
            outcomes = {o.key: o for o in sb.run(mbpp + with_setup + humaneval)}
        assert all(hog.poll() is None for hog in hogs), "the cores were not busy throughout"
    failing = {p.key: (outcomes[p.key].status, outcomes[p.key].detail)
               for p in mbpp + with_setup + humaneval if not outcomes[p.key].passed}
    assert list(failing) == ["367"], failing  # bigcode: MBPP 499/500, the setup variant 500/500
    assert "NameError" in outcomes["367"].stderr_tail


def test_a_crowded_cpu_counts_against_neither_limit():
    """Four CPU-bound processes share one pinned CPU, so the loop gets about a quarter of it:
    1 s of CPU takes ~4 s of wall time, past its 2 s clock limit. The time it waited for the CPU
    does not count, so it stops at its CPU limit; a sleeper, which queues for nothing, still
    stops at its clock limit, 2 s of wall time."""
    programs = [Program("crowded-loop", "while True:\n    pass", timeout_s=1.0, clock_s=2.0),
                Program("crowded-sleep", "import time\ntime.sleep(3600)", timeout_s=1.0, clock_s=2.0)]
    # in sessions of their own, as the sandbox's programs are: the kernel's autogroups share a CPU
    # between sessions first, so hogs in this test's session left the loop half of it (2.18 s)
    with one_crowded_cpu(spinners=3, sessions=True):  # inherited by the sandbox's programs
        with LocalSandbox(n_workers=1, limits=unstretched()) as sandbox:
            loop, sleep = sandbox.run(programs)
    assert (loop.status, loop.detail) == (TIMEOUT, CPU_DETAIL), loop
    assert loop.duration_s > 2.0, "the loop should have waited past its clock limit for the crowded CPU"
    assert (sleep.status, sleep.detail) == (TIMEOUT, CLOCK_DETAIL.format(2.0)), sleep
