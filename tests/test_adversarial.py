"""Adversarial programs against the Docker sandbox, for real (one file per attack in
tests/adversarial/, the MultiPL-E way). Each attack must be judged failed (never passed,
never a sandbox error), leave the host untouched (no processes, containers or files
left behind), and leave the other samples of the same run judged right.

The attacks run without the reliability guard (guard=False): the guard is not a
security boundary, the sandbox is.
"""
from __future__ import annotations

import os
import secrets
import subprocess
import time
from pathlib import Path

import pytest
from docker_env import container_ids, ensure_images, humaneval_programs, our_containers, processes_in, unstretched

from codeeval.executors.base import FAILED, PASSED, TIMEOUT, Limits, Program
from codeeval.executors.docker import sandbox as ds

ATTACKS = Path(__file__).resolve().parent / "adversarial"
TIMEOUT_S = 2.0
# Small enough that the memory bombs cost this machine little, big enough for Python + numpy.
LIMITS = unstretched(memory_mb=512)
# What each attack must end as; anything else (PASSED, SANDBOX_ERROR) is a failure.
EXPECTED = {
    "fork_bomb": {TIMEOUT, FAILED},
    "infinite_loop": {TIMEOUT},
    "spinning_threads": {TIMEOUT},
    "busy_orphan": {TIMEOUT},
    "long_sleep": {TIMEOUT},
    "read_stdin": {FAILED},
    "output_flood": {FAILED, TIMEOUT},
}


def host_addresses() -> list[str]:
    out = subprocess.run(["hostname", "-I"], capture_output=True, text=True)
    addrs = [a for a in out.stdout.split() if ":" not in a]
    return addrs + ["127.0.0.1"]


def attack_programs() -> list[Program]:
    programs = []
    for path in sorted(ATTACKS.glob("*.py")):
        code = path.read_text()
        if path.stem == "network_host":
            code = code.replace("HOST_ADDRESSES = []", f"HOST_ADDRESSES = {host_addresses()!r}")
        programs.append(Program(f"attack/{path.stem}", code, timeout_s=TIMEOUT_S, guard=False))
    return programs


def host_pwned_files() -> list[str]:
    found = []
    for place in ("/tmp", "/dev/shm", "/var/tmp", str(Path.cwd())):
        try:
            found += [os.path.join(place, n) for n in os.listdir(place) if "pwned" in n or n.startswith("fill-")]
        except OSError:
            pass
    return found


@pytest.fixture(scope="module")
def run(request):
    """One run: every attack interleaved with HumanEval canonical solutions, 2 workers."""
    ensure_images()
    canary = secrets.token_hex(8)
    os.environ["CODEEVAL_CANARY_SECRET"] = canary
    before_files = set(host_pwned_files())
    good = humaneval_programs(40)
    attacks = attack_programs()
    programs = []
    for i, attack in enumerate(attacks):  # interleave so attacks share containers with good samples
        programs += [attack, *good[2 * i:2 * i + 2]]
    programs += good[2 * len(attacks):]
    try:
        with ds.DockerSandbox(n_workers=2, limits=LIMITS) as sandbox:
            sandbox.start()
            names = [w.name for w in sandbox._workers if w is not None]
            ids = container_ids(names)
            started = time.monotonic()
            outcomes = sandbox.run(programs)
            elapsed = time.monotonic() - started
            live_names = [w.name for w in sandbox._workers if w is not None]
    finally:
        del os.environ["CODEEVAL_CANARY_SECRET"]
    return {
        "outcomes": {o.key: o for o in outcomes}, "attacks": attacks, "good": good, "sandbox_id": sandbox.id,
        "ids": ids, "names": names, "live_names": live_names, "canary": canary,
        "before_files": before_files,
    }


@pytest.mark.parametrize("attack", sorted(p.stem for p in ATTACKS.glob("*.py")))
def test_attack_is_judged_failed(run, attack):
    outcome = run["outcomes"][f"attack/{attack}"]
    allowed = EXPECTED.get(attack, {FAILED})
    assert not outcome.passed, (outcome.stdout_tail[-500:], outcome.stderr_tail[-500:])
    assert outcome.status in allowed, (outcome.status, outcome.detail, outcome.stderr_tail[-500:])
    assert len(outcome.stdout_tail) <= LIMITS.tail_bytes and len(outcome.stderr_tail) <= LIMITS.tail_bytes
    assert run["canary"] not in outcome.stdout_tail + outcome.stderr_tail


CPU_DETAIL = f"CPU time limit {TIMEOUT_S:g}s exceeded"
CLOCK_DETAIL = (f"time limit {TIMEOUT_S:g}s exceeded (wall clock less the time spent waiting for a CPU: the program "
                f"ran, slept or blocked that long)")


@pytest.mark.parametrize("attack", ["infinite_loop", "spinning_threads", "busy_orphan"])
def test_cpu_burners_stop_at_their_limit(run, attack):
    """The CPU of every thread, child and orphan counts, and so does the clock of a program that
    waits for them (busy_orphan's program itself sleeps while its orphan burns): these stop at
    whichever of the two limits (the same seconds) they reach first."""
    outcome = run["outcomes"][f"attack/{attack}"]
    assert outcome.status == TIMEOUT and outcome.detail in (CPU_DETAIL, CLOCK_DETAIL), outcome.detail
    # Stopped when the server read a limit passed, not later by RLIMIT_CPU (at 2 * ceil(limit * the
    # largest slowdown) + 1 s: base.rlimit_spec) or the wall-clock cap. The server reads the tree's CPU
    # from its own process, which waits for a CPU too on a loaded host: at load 6-7 it read a 2 s limit
    # passed at 2.518 s (issue 51), so the bound is a second past the limit, not the poll's interval.
    assert TIMEOUT_S - 0.3 < outcome.cpu_s < TIMEOUT_S + 1.0, outcome.cpu_s


def test_long_sleep_stops_at_its_clock_limit(run):
    outcome = run["outcomes"]["attack/long_sleep"]
    assert (outcome.status, outcome.detail) == (TIMEOUT, CLOCK_DETAIL)
    assert outcome.cpu_s < 0.5


def test_other_samples_still_judged_right(run):
    bad = [(p.key, run["outcomes"][p.key].status, run["outcomes"][p.key].stderr_tail[-300:])
           for p in run["good"] if run["outcomes"][p.key].status != PASSED]
    assert not bad


def test_no_container_was_lost(run):
    # No attack killed its container: the same two containers served the whole run.
    assert run["live_names"] == run["names"]


def test_host_is_unaffected(run):
    deadline = time.monotonic() + 10
    while (our_containers(sandbox_id=run["sandbox_id"]) or processes_in(run["ids"])) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not our_containers(sandbox_id=run["sandbox_id"]), "containers left behind"
    assert not processes_in(run["ids"]), "processes of the containers left behind"
    assert set(host_pwned_files()) == run["before_files"], "files left on the host"


def test_output_fifo_is_failed_quickly_and_its_output_kept(run):
    """The server reads the tails through its own descriptors: a FIFO swapped in for
    /out/stdout neither hangs it (which would end as a sandbox error) nor hides the output."""
    outcome = run["outcomes"]["attack/output_fifo"]
    assert outcome.status == FAILED and outcome.duration_s < TIMEOUT_S, (outcome.status, outcome.detail)
    assert outcome.stdout_tail == "written before the swap\n"
    assert "the tests fail" in outcome.stderr_tail


def test_detached_daemon_is_dead_before_the_next_program():
    ensure_images()
    daemon = (ATTACKS / "detached_daemon.py").read_text()
    check = (
        "import os, time\n"
        "time.sleep(1.0)\n"
        "others = [p for p in os.listdir('/proc') if p.isdigit() and int(p) not in (1, os.getpid())]\n"
        "assert others == [], others\n"
        "assert not os.path.exists('/tmp/codeeval-pwned')\n"
    )
    with ds.DockerSandbox(n_workers=1, limits=LIMITS) as sb:
        first, second = sb.run([Program("daemon", daemon, timeout_s=TIMEOUT_S, guard=False),
                                Program("check", check, timeout_s=TIMEOUT_S, guard=False)])
    assert first.status == FAILED
    assert second.status == PASSED, second.stderr_tail


def test_network_is_only_loopback():
    ensure_images()
    code = (
        "import socket\n"
        "names = [n for _, n in socket.if_nameindex()]\n"
        "assert names == ['lo'], names\n"
    )
    with ds.DockerSandbox(n_workers=1, limits=LIMITS) as sb:
        [o] = sb.run([Program("ifaces", code, guard=False)])
    assert o.status == PASSED, o.stderr_tail


def test_container_memory_limit_kills_the_program_not_the_server():
    """With RLIMIT_AS above the container's --memory, the cgroup OOM killer acts: it must
    pick the program (oom_score_adj 1000), and the container must go on serving."""
    ensure_images()
    bomb = (ATTACKS / "memory_bomb_gradual.py").read_text()
    container = ds.ContainerLimits(memory_mb=700)
    with ds.DockerSandbox(n_workers=1, limits=Limits(memory_mb=4096), container=container) as sb:
        sb.start()
        name = sb._workers[0].name
        bombed, after = sb.run([Program("bomb", bomb, timeout_s=10, guard=False), Program("after", "pass")])
        assert sb._workers[0].name == name  # the same container: the server survived
    assert bombed.status == FAILED and bombed.exit_code == -9, (bombed.status, bombed.detail)
    assert after.status == PASSED
