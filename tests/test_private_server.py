"""The private Prefect API server a CLI run starts when none is configured (codeeval/prefect_api.py).

It is told to stop when the flow ends and the CLI returns at once; the server then finishes
writing the run's last events by itself. These tests read what the Prefect UI would show from
its database afterwards, the one line a run prints when that server cannot start, and a run on
the plain path (codeeval/prefect_compat.py): forced on the pinned Prefect, and on a Prefect the
patches were not tested on, installed over the test environment in a venv of its own.
"""
from __future__ import annotations

import os
import json
import sqlite3
import ssl
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _env(home: Path, **extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    env.update(PREFECT_HOME=str(home), PREFECT_SERVER_ANALYTICS_ENABLED="false", DO_NOT_TRACK="1", **extra)
    return env


def _run(data_dir: Path, out: Path, env: dict, python: str = sys.executable,
         limit: int = 3) -> subprocess.CompletedProcess:
    return subprocess.run(
        [python, "-m", "codeeval", "run", "--model", "reference", "--tasks", "humaneval", "--limit", str(limit),
         "--allow_code_execution", "--executor", "local", "--data-dir", str(data_dir), "--output-dir", str(out)],
        env=env, capture_output=True, text=True, timeout=300, cwd=ROOT)


def _servers_of(home: Path) -> set[int]:
    """Live private servers whose PREFECT_HOME is `home` (other runs' servers share the machine)."""
    mine = f"PREFECT_HOME={home}".encode()
    found = set()
    for entry in os.listdir("/proc"):
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            if b"codeeval.prefect_api" in cmdline and mine in Path(f"/proc/{entry}/environ").read_bytes().split(b"\0"):
                found.add(int(entry))
        except (OSError, ValueError):
            continue
    return found


def test_a_finished_run_has_every_task_run_recorded_and_its_server_gone(data_dir, tmp_path):
    home = tmp_path / "prefect-home"
    done = _run(data_dir, tmp_path / "out", _env(home))
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Prefect patches skipped" not in done.stderr  # the pinned Prefect: the gated patches apply
    deadline = time.monotonic() + 15  # the server's own shutdown limit is 10 s
    while _servers_of(home) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _servers_of(home), "the private server outlived its run by more than its shutdown limit"

    with sqlite3.connect(home / "prefect.db") as db:
        flows = db.execute("SELECT state_type FROM flow_run").fetchall()
        tasks = db.execute("SELECT name, state_type FROM task_run").fetchall()
    assert flows == [("COMPLETED",)]
    # the last of them ends a moment before the CLI returns
    assert sorted(tasks) == [("execute-humaneval-shard-000", "COMPLETED"), ("generate-humaneval-shard-000", "COMPLETED"),
                             ("load-humaneval", "COMPLETED"), ("score-humaneval", "COMPLETED")]
    # its Prefect clients were pointed at one certificate, not certifi's bundle: the API is plain HTTP
    ca_file = home / "codeeval-loopback-ca.pem"
    assert ssl.create_default_context(cafile=str(ca_file)).cert_store_stats()["x509_ca"] == 1


def test_a_server_that_cannot_start_fails_the_run_in_one_line_with_its_cause(data_dir, tmp_path):
    env = _env(tmp_path / "prefect-home",
               PREFECT_API_DATABASE_CONNECTION_URL=f"sqlite+aiosqlite:///{tmp_path}/no-such-dir/prefect.db")
    started = time.monotonic()
    done = _run(data_dir, tmp_path / "out", env)
    assert done.returncode == 1, done.stderr[-3000:]
    assert time.monotonic() - started < 60
    assert done.stderr.strip().splitlines()[-1] == (
        "codeeval: run failed: the temporary Prefect API server exited with status 3: "
        "sqlalchemy.exc.OperationalError: (sqlite3.OperationalError) unable to open database file")
    assert not (tmp_path / "out" / "humaneval" / "metrics.json").exists()


PINNED = "3.8.8"  # constraints.txt: the version prefect_compat.TESTED names
UNTESTED = "3.8.7"  # the lower end of pyproject's range: no patch was tested on it


def _with_prefect(version: str, root: Path) -> str:
    """A venv whose Prefect is `version` over the test environment's packages (a .pth adds them
    after its own), installed by pip against constraints.txt but its Prefect pin: nothing else is
    downloaded or built. Made once per test session."""
    venv = root / f"prefect-{version}"
    python = venv / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
        site = venv / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"
        base = sysconfig.get_paths()["purelib"]  # the test environment's site-packages
        (site / "test-environment.pth").write_text(f"import site; site.addsitedir({base!r})\n")
        constraints = root / "constraints.txt"
        constraints.write_text("".join(line for line in (ROOT / "constraints.txt").read_text().splitlines(True)
                                       if not line.startswith("prefect==")))
        subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q",
                        "--disable-pip-version-check", f"prefect=={version}", "-c", str(constraints)],
                       check=True, capture_output=True, timeout=600)
    return str(python)


@pytest.mark.parametrize("version, switch, why", [
    (PINNED, {"CODEEVAL_PREFECT_PATCHES": "off"}, "CODEEVAL_PREFECT_PATCHES=off"),
    (UNTESTED, {}, f"tested on prefect {PINNED} only, this is {UNTESTED}"),
])
def test_a_run_boots_its_server_plain_where_the_patches_were_not_tested(version, switch, why, data_dir, tmp_path,
                                                                         tmp_path_factory):
    python = sys.executable if version == PINNED else _with_prefect(version, tmp_path_factory.getbasetemp())
    found = subprocess.run([python, "-c", "import prefect; print(prefect.__version__)"], capture_output=True, text=True)
    assert found.stdout.strip() == version, found.stderr[-2000:]
    env = _env(tmp_path / "prefect-home", PYTHONPATH=str(ROOT), **switch)
    done = _run(data_dir, tmp_path / "out", env, python=python, limit=2)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stderr.splitlines()[0] == (
        f"codeeval: Prefect patches skipped (routers, hash_key): {why}; the server boots plain")
    metrics = json.loads((tmp_path / "out" / "humaneval" / "metrics.json").read_text())
    assert (metrics["metrics"]["pass@1"], metrics["passed"]) == (1.0, 2)  # the reference solutions, executed and scored


def test_each_of_a_flow_runs_first_routes_is_the_route_prefects_own_order_matches():
    """The routes served first (prefect_compat.FLOW_RUN_ROUTES) change no answer: for a request to
    each, the first route in Prefect's own router order that matches it is that same route."""
    import uuid

    from prefect.server import api
    from prefect.server.api import server
    from starlette.routing import Match

    from codeeval.prefect_compat import FLOW_RUN_ROUTERS, FLOW_RUN_ROUTES, flow_run_routes

    first = flow_run_routes([getattr(api, name).router for name in FLOW_RUN_ROUTERS])
    assert len(first) == len(FLOW_RUN_ROUTES)  # every route is there on the Prefect the patch is tested on
    in_prefects_order = [route for router in server.API_ROUTERS for route in router.routes]
    for (method, path), route in zip(FLOW_RUN_ROUTES, first):
        concrete = path.replace("{id:uuid}", str(uuid.uuid4()))
        scope = {"type": "websocket", "path": concrete} if method is None else \
            {"type": "http", "path": concrete, "method": method}
        matched = next(r for r in in_prefects_order if r.matches(scope)[0] == Match.FULL)
        assert matched is route, (method, path, getattr(matched, "path", None))


def test_a_run_and_a_nightly_build_only_the_routes_a_flow_run_calls(data_dir, tmp_path):
    """FastAPI builds a router's routes on the first request that walks past them; a reference
    run and a nightly of two models, on the private server's app, walk past none but the first."""
    from codeeval.prefect_compat import FLOW_RUN_ROUTES

    home = tmp_path / "prefect-home"
    probe = subprocess.Popen([sys.executable, str(ROOT / "tests" / "route_probe.py")], env=_env(home),
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        port = probe.stdout.readline().split()[0]
        env = _env(home, PREFECT_API_URL=f"http://127.0.0.1:{port}/api")
        models = tmp_path / "models.yaml"
        models.write_text(f"defaults: {{tasks: [humaneval], limit: 2, allow_code_execution: true, executor: local, "
                          f"data_dir: {data_dir}}}\nmodels:\n  - model: reference\n"
                          f"  - model: replayed-example\n    load_generations_path: "
                          f"{ROOT / 'examples' / 'replayed-humaneval.json'}\n")
        for cmd in (["run", "--model", "reference", "--tasks", "humaneval", "--limit", "1", "--allow_code_execution",
                     "--executor", "local", "--data-dir", str(data_dir), "--output-dir", str(tmp_path / "run")],
                    ["nightly", str(models), "--output-dir", str(tmp_path / "board"), "--runs-dir",
                     str(tmp_path / "runs")]):
            done = subprocess.run([sys.executable, "-m", "codeeval", *cmd], env=env, capture_output=True, text=True,
                                  timeout=300, cwd=ROOT)
            assert done.returncode == 0, done.stderr[-3000:]
    finally:
        out, err = probe.communicate(timeout=60)  # its input ends: it stops and reports
    built = json.loads(out.strip().splitlines()[-1])
    expected = sorted([method or "WEBSOCKET", path] for method, path in FLOW_RUN_ROUTES)
    assert built == [expected], err[-2000:]
