"""No repository slot outlives its holder (codeeval/tasks/slots.py, slot_holders.py).

A repo-level `codeeval run` of the three DevEval projects in ../shared is stopped at a seeded
random moment of its execution (SIGTERM, Ctrl-C, SIGKILL), then run again on the same Prefect
home, as a user on one machine would: the second run finishes at once with the undisturbed
scores, reusing every finished shard, and leaves no slot active. Processes killed at the exact
moments that random kills rarely hit (between the increment and the holder's record; after the
private server died; before a reboot) leave nothing that blocks the next taker either.
"""
from __future__ import annotations

import json
import os
import random
import re
import signal
import socket
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from docker_env import ensure_images
from procs import alive, children

from codeeval.core.processes import PRIVATE_API_ENV

# the same kill moments in every CI run; CODEEVAL_SLOTS_SEED=<n> tries other ones
SEED = int(os.environ.get("CODEEVAL_SLOTS_SEED") or 32)
RUN_TIMEOUT_S = 240  # a run that waits on a leaked slot never ends: this ends the test instead


def private_env(home: Path) -> dict:
    """A user's environment: no configured API (each run starts its private server), one Prefect home."""
    env = {k: v for k, v in os.environ.items() if k not in ("PREFECT_API_URL", PRIVATE_API_ENV)}
    env.update(PREFECT_HOME=str(home), PREFECT_SERVER_ANALYTICS_ENABLED="false", DO_NOT_TRACK="1")
    return env


def active_slots(home: Path) -> dict[str, int]:
    """The repo:* limits with active slots, read from the private servers' database."""
    database = home / "prefect.db"
    if not database.exists():
        return {}
    with sqlite3.connect(f"file:{database}?mode=ro", uri=True, timeout=30) as db:
        try:
            rows = db.execute("select name, active_slots from concurrency_limit_v2 where name like 'repo:%'").fetchall()
        except sqlite3.OperationalError:  # the tables are not created yet
            return {}
    return {name: n for name, n in rows if n}


def command(data_dir: Path, out: Path) -> list[str]:
    return [sys.executable, "-m", "codeeval", "run", "--model", "reference", "--tasks", "deveval",
            "--allow_code_execution", "--data-dir", str(data_dir), "--output-dir", str(out)]


def shard_files(out: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(out)): (p.stat().st_ino, p.stat().st_mtime_ns)
            for p in sorted(out.glob("deveval/*/shard-*.parquet"))}


def rows(out: Path) -> list[dict]:
    keep = ("task_id", "sample", "status", "passed")
    return sorted((tuple(r[k] for k in keep) for p in sorted(out.glob("deveval/executions/shard-*.parquet"))
                   for r in pq.read_table(p, columns=list(keep)).to_pylist()))


@pytest.fixture(scope="module")
def site(data_dir, tmp_path_factory):
    """One Prefect home for every run of this module (a user's ~/.prefect), and an undisturbed run."""
    ensure_images()
    root = tmp_path_factory.mktemp("slots")
    env = private_env(root / "prefect-home")
    out = root / "undisturbed"
    done = subprocess.run(command(data_dir, out), env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return root, env, json.loads((out / "deveval" / "metrics.json").read_text()), rows(out)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT, signal.SIGKILL])
def test_a_stopped_repo_level_run_never_blocks_the_next(site, data_dir, signum):
    root, env, metrics, undisturbed = site
    home = Path(env["PREFECT_HOME"])
    name = signal.Signals(signum).name
    delay = round(random.Random(f"{SEED}-{name}").uniform(0.0, 2.5), 2)
    case = f"{name} {delay} s after a repository's slot was first taken (seed {SEED})"
    out = root / f"stopped-{name}"
    err = open(root / f"{name}.stderr", "w+")
    proc = subprocess.Popen(command(data_dir, out), env=env, stdout=subprocess.DEVNULL, stderr=err,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 300
        while not active_slots(home):
            assert proc.poll() is None, f"{case}: the run ended first: " + open(err.name).read()[-3000:]
            assert time.monotonic() < deadline, f"{case}: no slot taken in 300 s"
            time.sleep(0.05)
        time.sleep(delay)
        assert proc.poll() is None and not (out / "results.json").exists(), f"{case}: the run finished first"
        tree = children(proc.pid) | {proc.pid}
        if signum == signal.SIGINT:
            os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C: the terminal's whole foreground group
        else:
            os.kill(proc.pid, signum)
        code = proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert code == (-signum if signum == signal.SIGKILL else 128 + signum), (case, code)
    deadline = time.monotonic() + 15
    while alive(tree) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not alive(tree), f"{case}: processes of the stopped run left: {alive(tree)}"
    left = active_slots(home)
    before = shard_files(out)

    started = time.monotonic()
    again = subprocess.run(command(data_dir, out), env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    took = time.monotonic() - started
    freed = [line.split(" - ", 1)[-1] for line in again.stderr.splitlines() if "freed its slot" in line]
    print(f"{case}: slots left active {left or 'none'}; the next run took {took:.1f} s; freed: {freed or 'none'}")
    assert again.returncode == 0, (case, again.stderr[-3000:])
    assert "waiting since" not in again.stderr, (case, again.stderr[-3000:])  # a dead holder is freed at once
    assert len(freed) == len(left), (case, left, freed)
    assert json.loads((out / "deveval" / "metrics.json").read_text()) == metrics, case
    assert rows(out) == undisturbed, case
    after = shard_files(out)
    assert all(after[f] == stamp for f, stamp in before.items()), f"{case}: a finished shard was written again"
    assert f"reused {sum('generations' in f for f in before)}/3 generation and " \
           f"{sum('executions' in f for f in before)}/3 execution shards" in again.stdout, (case, again.stdout)
    assert active_slots(home) == {}, case


# ---- the moments a random kill rarely hits ---------------------------------------------------

HOLDER = textwrap.dedent("""
    import os, signal, sys, time
    from codeeval import prefect_api

    moment = sys.argv[1]
    with prefect_api.api_for_run() as server:  # as the CLI does: Prefect is imported once its URL is set
        if server is not None:  # else a configured (team) server
            server.wait_ready()
        from codeeval.tasks import slot_holders, slots

        if moment == "before-record":  # killed right after the server counted the slot
            slot_holders.Scope.write = lambda self, *a: os.kill(os.getpid(), signal.SIGKILL)
        started = time.monotonic()
        with slots.held([os.environ.get("PROBE_LIMIT", "repo:Probe:window")], run="probe-" + moment):
            print(f"held after {time.monotonic() - started:.2f} s", flush=True)
            if moment == "hold":  # until the test closes our standard input
                sys.stdin.read()
            elif moment == "server-dies-first":
                server.proc.kill()
                server.proc.wait()
            elif moment == "sigkill-while-held":
                os.kill(os.getpid(), signal.SIGKILL)
""")


def hold(env: dict, moment: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", HOLDER, moment], env=env, capture_output=True, text=True,
                          timeout=timeout)


@pytest.mark.parametrize("moment", ["before-record", "sigkill-while-held", "server-dies-first", "reboot"])
def test_a_holder_that_dies_at_any_moment_frees_its_slot(tmp_path, moment):
    """On the CLI's private server: the holder SIGKILLed between the server's count and its
    record, SIGKILLed while holding, or outliving its private server; a record from before a
    reboot. The next taker gets the slot at once and leaves none active."""
    home = tmp_path / "prefect-home"
    env = private_env(home)
    if moment == "reboot":
        first = hold(env, "sigkill-while-held")
        records = list(home.glob("codeeval-slots-prefect/*.json"))
        assert len(records) == 1, records
        record = json.loads(records[0].read_text())
        records[0].write_text(json.dumps(dict(record, boot="an-earlier-boot", pid=1, start="1")))
    else:
        first = hold(env, moment)
    expected = 0 if moment == "server-dies-first" else -signal.SIGKILL  # that one ends normally, warned
    assert first.returncode == expected, (moment, first.returncode, first.stderr[-2000:])
    assert active_slots(home) == {"repo:Probe:window": 1}, (moment, first.stderr[-2000:])
    second = hold(env, "release")
    assert second.returncode == 0, second.stderr[-3000:]
    waited = float(second.stdout.split("held after ")[1].split()[0])
    print(f"{moment}: the next taker held the slot after {waited:.2f} s")
    assert waited < 5 and "waiting since" not in second.stderr, (moment, second.stdout, second.stderr[-2000:])
    assert "repository Probe/window: freed its slot repo:Probe:window, left by " in second.stderr, second.stderr[-2000:]
    assert active_slots(home) == {}


def test_a_wait_for_a_held_repository_is_said_once_and_inspect_shows_it(site, data_dir):
    """A live process of this host holds DevEval's twtxt repository: the run's shard for it waits,
    says once (on the terminal and in its Prefect log) which repository, since when and who holds
    it; `codeeval inspect` shows the run waiting; once the holder lets go, the run ends as usual."""
    root, env, metrics, _ = site
    home = Path(env["PREFECT_HOME"])
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, "hold"], env={**env, "PROBE_LIMIT": "repo:Communications:twtxt"},
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out = root / "waits"
    err = open(root / "waits.stderr", "w+")
    run = None
    try:
        assert holder.stdout.readline().startswith("held after"), holder.stderr.read()[-2000:]
        run = subprocess.Popen(command(data_dir, out), env=env, stdout=subprocess.PIPE, stderr=err, text=True)
        deadline = time.monotonic() + 180
        while "waiting since" not in (said := open(err.name).read()):
            assert run.poll() is None and time.monotonic() < deadline, said[-3000:]
            time.sleep(0.2)
        report = subprocess.run([sys.executable, "-m", "codeeval", "inspect", str(out)], env=env, capture_output=True,
                                text=True, timeout=120)
        assert report.returncode == 0, report.stderr
        time.sleep(3)  # still waiting: no second line
    finally:
        holder.stdin.close()
        holder.wait(timeout=60)
        if run is not None:
            try:
                run.wait(timeout=180)
            finally:
                if run.poll() is None:
                    run.kill()
    said = open(err.name).read()
    (line,) = [ln for ln in said.splitlines() if "waiting since" in ln]
    print(line, "\n", report.stdout, sep="")
    assert re.search(r"WARNING \| Task run 'execute-deveval-shard-\d+' - waiting since \d\d:\d\d:\d\d for repository "
                     r"Communications/twtxt \(Prefect limit repo:Communications:twtxt\): held by pid "
                     rf"{holder.pid} on host {socket.gethostname()} since \d\d:\d\d:\d\d \(probe-hold\)", line), line
    assert "Waiting for a slot:" in report.stdout and "has waited for repository Communications/twtxt since" \
        in report.stdout and "waiting now" in report.stdout and f"held by pid {holder.pid}" in report.stdout, report.stdout
    assert run.returncode == 0, said[-3000:]
    assert json.loads((out / "deveval" / "metrics.json").read_text()) == metrics
    assert "Waiting for a slot" not in subprocess.run([sys.executable, "-m", "codeeval", "inspect", str(out)], env=env,
                                                      capture_output=True, text=True, timeout=120).stdout
    with sqlite3.connect(f"file:{home / 'prefect.db'}?mode=ro", uri=True, timeout=30) as db:
        logged = [m for (m,) in db.execute("select message from log where message like 'waiting since%'")]
    assert any(f"held by pid {holder.pid} on host {socket.gethostname()}" in m for m in logged), logged
    assert active_slots(home) == {}


def test_on_a_team_server_a_killed_holder_delays_the_next_by_at_most_the_lease(tmp_path):
    """scripts/prefect-server.sh on PostgreSQL (docs/deployment.md's team path), leases of 60 s: a
    holder SIGKILLed while holding is freed by the next taker of its host at once (its record names
    its lease); one SIGKILLed before its record (or, alike, another host's) holds the next taker no
    longer than the lease, which the server's repossessor revokes. The server logs no error."""
    from team_server import ERROR_LINE, credential, free_port, start_postgres, wait_http

    port = free_port()
    env = {**os.environ, "PREFECT_HOME": str(tmp_path / "prefect-home"), "PORT": str(port),
           "PUBLIC_URL": f"http://127.0.0.1:{port}", "PREFECT_API_URL": f"http://127.0.0.1:{port}/api",
           "PYTHON": sys.executable, "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "DO_NOT_TRACK": "1",
           "PREFECT_SERVER_SERVICES_REPOSSESSOR_LOOP_SECONDS": "2", "CODEEVAL_SLOT_LEASE_S": "60",
           "CODEEVAL_CACHE": str(tmp_path / "cache")}
    env.pop(PRIVATE_API_ENV, None)
    setting, stop_db = start_postgres(tmp_path)
    env.update(setting)
    server = None
    try:
        server = subprocess.Popen(["bash", str(Path(__file__).parents[1] / "scripts" / "prefect-server.sh")], env=env,
                                  stdout=open(tmp_path / "server.log", "w"), stderr=subprocess.STDOUT,
                                  start_new_session=True)
        wait_http(f"http://127.0.0.1:{port}/api/health", 180, tmp_path / "server.log")
        env["PREFECT_API_AUTH_STRING"] = credential(tmp_path / "prefect-home")
        waits = {}
        for moment in ("sigkill-while-held", "before-record"):
            first = hold(env, moment)
            assert first.returncode == -signal.SIGKILL, (moment, first.stderr[-2000:])
            killed = time.monotonic()
            second = hold(env, "release", timeout=180)
            assert second.returncode == 0, (moment, second.stderr[-3000:])
            waits[moment] = (time.monotonic() - killed, second.stderr)
        print({m: round(w, 1) for m, (w, _) in waits.items()})
        took, said = waits["sigkill-while-held"]
        assert took < 15 and "freed its slot repo:Probe:window, left by pid" in said, said[-2000:]
        took, said = waits["before-record"]
        assert 20 < took < 60 + 15, (took, said[-2000:])  # the lease (60 s) and the repossessor's loop
        assert "its holder is not known on this host: another host's, whose lease lapses within 60 s" in said, said
    finally:
        if server is not None:
            os.killpg(server.pid, signal.SIGTERM)
            server.wait(timeout=60)
        stop_db()
    errors = [ln for ln in (tmp_path / "server.log").read_text(errors="replace").splitlines() if ERROR_LINE.search(ln)]
    assert not errors, "\n".join(errors[:20])
