"""A hostile client against the team server (docs/security.md, "Team server"): the server of
scripts/prefect-server.sh with its credential, on SQLite and on PostgreSQL, prefect.yaml's
deployments, a cpu and a gpu worker with the narrow policy of a real team (its storage, one data
root, nothing allowed). Without the credential the API answers 401; every parameter that would
switch the sandbox off, run the model's code, read or write outside the worker's roots or exceed
its caps, or run programs under any runtime but gVisor, which the workers require, is refused
before anything runs, in one line, with no container started, no file written
outside the storage and no process left; an API key is refused before the server stores it, and
no trace of it is anywhere; a model label with HTML in it is text on the leaderboard page. On
SQLite: the UI asks for the credential before it shows the runs (screenshots kept), and the
same server answers through the TLS proxy of scripts/tls-proxy.sh."""
from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import pytest
from docker_env import ensure_images
from procs import alive
from team_server import (CHROMIUM, Server, basic_auth, chromium_page, copy_checkout, free_port, start_postgres,
                         wait_http, with_page)

PLANTED = "sk-planted-" + uuid.uuid4().hex  # an API key a caller sends as a parameter
FINAL = ("COMPLETED", "FAILED", "CRASHED", "CANCELLED")
HTML_LABEL = '<img src=x onerror="document.title=1">model'


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def team(request, tmp_path_factory, data_dir):
    """The server with its credential, the deployments, and workers whose environment is the policy:
    CODEEVAL_STORAGE=<tmp>/storage, CODEEVAL_DATA_ROOTS=<tmp>/data (HumanEval, saved generations,
    a models file, and a link `escape` to <tmp>/outside, which holds a secret), nothing allowed."""
    ensure_images()
    tmp = tmp_path_factory.mktemp(f"team-{request.param}")
    project, data, outside, storage = tmp / "project", tmp / "data", tmp / "outside", tmp / "storage"
    copy_checkout(project)
    (data / "humaneval").mkdir(parents=True)
    shutil.copy(data_dir / "humaneval" / "HumanEval.jsonl.gz", data / "humaneval")
    with gzip.open(data_dir / "humaneval" / "HumanEval.jsonl.gz", "rt") as fh:
        records = [json.loads(line) for line in fh][:2]
    (data / "gens.jsonl").write_text("".join(json.dumps({"task_id": r["task_id"], "solution": r["prompt"] +
                                                         r["canonical_solution"]}) + "\n" for r in records))
    (data / "models.yaml").write_text(json.dumps({"models": [{
        "model": HTML_LABEL, "tasks": ["humaneval"], "limit": 2, "allow_code_execution": True,
        "data_dir": str(data), "load_generations_path": str(data / "gens.jsonl")}]}))
    outside.mkdir()
    (outside / "secret.json").write_text(json.dumps([["the worker's secret"]]))
    (data / "escape").symlink_to(outside)
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CODEEVAL_WORKER_", "PREFECT_API_AUTH"))}
    env.update({"PREFECT_HOME": str(tmp / "prefect-home"), "PORT": str(port), "PUBLIC_URL": f"http://127.0.0.1:{port}",
                "PREFECT_API_URL": f"http://127.0.0.1:{port}/api", "PYTHON": sys.executable,
                "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "DO_NOT_TRACK": "1",
                "PREFECT_WORKER_QUERY_SECONDS": "2", "COLUMNS": "250", "CODEEVAL_STORAGE": str(storage),
                "CODEEVAL_DATA_ROOTS": str(data), "CODEEVAL_CACHE": str(tmp / "cache"),
                # a second wall, required: every program runs under gVisor (`make engine RUNTIME=runsc`)
                "CODEEVAL_WORKER_REQUIRE_RUNTIME": "runsc", "CODEEVAL_SANDBOX_RUNTIME": "runsc"})
    stop_db = None
    if request.param == "postgresql":
        setting, stop_db = start_postgres(tmp)
        env.update(setting)
    srv = Server(env=env, tmp=tmp, project=project, database=request.param)
    srv.paths = {"data": data, "outside": outside, "storage": storage}
    try:
        srv.server = srv.start(str(project / "scripts" / "prefect-server.sh"), log="server.log")
        wait_http(f"http://127.0.0.1:{port}/api/health", 180, tmp / "server.log")
        srv.authorize()
        srv.deploy()
        srv.start("worker", "start", "--pool", "cpu", "--limit", "16", log="worker-cpu.log")
        srv.start("worker", "start", "--pool", "gpu", "--limit", "2", log="worker-gpu.log")
        yield srv
        srv.stop_workers()
    finally:
        srv.kill_all()
        if stop_db:
            stop_db()
    errors = srv.log_errors()
    assert not errors, f"the {request.param} server logged errors:\n" + "\n".join(errors[:20])


def answer(url: str, auth: str | None = None, context=None) -> int:
    headers = {"Content-Type": "application/json"} | ({"Authorization": auth} if auth else {})
    request = urllib.request.Request(url, data=b"{}", headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=30, context=context) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code


def test_without_the_credential_the_api_answers_401(team):
    api = team.env["PREFECT_API_URL"]
    for path in ("/flow_runs/filter", "/deployments/filter", "/artifacts/filter", "/block_documents/filter"):
        assert answer(api + path) == 401, path
        assert answer(api + path, basic_auth("codeeval:wrong")) == 401, path
        assert answer(api + path, "Bearer " + team.env["PREFECT_API_AUTH_STRING"]) == 401, path
        assert answer(api + path, basic_auth(team.env["PREFECT_API_AUTH_STRING"])) == 200, path
    stranger = {k: v for k, v in team.env.items() if k != "PREFECT_API_AUTH_STRING"}
    listed = subprocess.run([str(Path(sys.executable).with_name("prefect")), "deployment", "ls"], env=stranger,
                            capture_output=True, text=True, timeout=120)
    assert listed.returncode != 0 and "evaluate" not in listed.stdout, listed.stdout + listed.stderr


def attempts(srv) -> dict[str, tuple[str, dict, str]]:
    """name -> (deployment, parameters, the phrase of its refusal)."""
    data, outside, storage = (str(srv.paths[k]) for k in ("data", "outside", "storage"))
    base = {"model": "reference", "tasks": ["humaneval"], "allow_code_execution": True, "limit": 2, "data_dir": data}
    replay = {**base, "model": "replayed", "load_generations_path": f"{data}/gens.jsonl"}

    def evaluate(name, change, phrase, config=base):
        return name, ("evaluate/evaluate", {"config": {**config, **change}}, phrase)

    shard = {"shard": {"task": "humaneval", "stage": "execute", "index": 0}, "run_dir": f"{storage}/r",
             "problems_path": f"{storage}/r/p.parquet", "generations_path": f"{storage}/r/g.parquet", "cache_key": "k",
             "sandbox": {"name": "local", "n_workers": 1}}
    return dict([
        evaluate("local-executor", {"executor": "local"}, "executor 'local' runs model output outside the Docker sandbox"),
        evaluate("trust-remote-code", {"model": f"{data}/model", "generation": {"trust_remote_code": True}},
                 "trust_remote_code runs the model repository's Python on this host"),
        evaluate("output-outside", {"output_dir": f"{outside}/run"}, f"output_dir '{outside}/run' is outside"),
        evaluate("metric-output-outside", {"metric_output_path": "/etc/codeeval-metrics.json"},
                 "metric_output_path '/etc/codeeval-metrics.json' is outside this worker's storage"),
        evaluate("read-outside", {"load_generations_path": f"{outside}/secret.json"},
                 f"load_generations_path '{outside}/secret.json' is outside this worker's data roots", replay),
        evaluate("data-outside", {"data_dir": "/etc"}, "data_dir '/etc' is outside this worker's data roots"),
        evaluate("source-code-outside", {"tasks": ["deveval"], "source_code_root": "/root"},
                 "source_code_root '/root' is outside this worker's data roots"),
        evaluate("dotdot-path", {"output_dir": f"{storage}/../outside/x"}, "climbs out of its directory with '..'"),
        evaluate("symlink-escape", {"load_generations_path": f"{data}/escape/secret.json"},
                 f"load_generations_path '{data}/escape/secret.json' is outside this worker's data roots", replay),
        evaluate("dotdot-label", {"model": "../../../etc/passwd"}, "model '../../../etc/passwd' would become a path",
                 replay),
        evaluate("dotdot-task", {"tasks": ["../humaneval"]}, "tasks[0] '../humaneval' would become a path"),
        evaluate("too-many-workers", {"n_workers": 512}, "n_workers 512 is over this worker's cap"),
        evaluate("too-much-memory", {"memory_mb": 1 << 20}, "memory_mb 1048576 is over this worker's cap of 4096"),
        evaluate("runc-runtime", {"sandbox_runtime": "runc"},
                 "the sandbox would run under runc, and this worker requires runsc (CODEEVAL_WORKER_REQUIRE_RUNTIME)"),
        ("shard-runc-runtime", ("execute-shard/execute-shard",
                                {**shard, "sandbox": {"name": "docker", "n_workers": 1, "container_runtime": "runc"}},
                                "the sandbox would run under runc, and this worker requires runsc")),
        ("shard-local-sandbox", ("execute-shard/execute-shard", shard,
                                 "executor 'local' runs model output outside the Docker sandbox")),
        ("shard-dotdot-task", ("execute-shard/execute-shard",
                               {**shard, "shard": {"task": "../..", "stage": "execute", "index": 0},
                                "sandbox": {"name": "docker", "n_workers": 1}},
                               "name '../..' would become a path outside its directory")),
        ("nightly-models-outside", ("nightly-leaderboard/nightly-leaderboard",
                                    {"models_file": f"{outside}/models.yaml"}, "models_file")),
    ])


def prefect(srv, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return srv.cli(*args, timeout=timeout)


def started_containers(since: float, until: float, pids: set[int]) -> list[str]:
    """Sandbox containers created in the window by these processes (their owner label)."""
    import docker

    from codeeval.executors.docker.owners import LABEL, OWNER_LABEL

    client = docker.from_env(timeout=30)
    try:
        events = client.events(since=int(since) - 1, until=int(until) + 2, decode=True,
                               filters={"label": LABEL, "event": "create", "type": "container"})
        owners = [e.get("Actor", {}).get("Attributes", {}).get(OWNER_LABEL, "") for e in events]
    finally:
        client.close()
    return [o for o in owners if o.split("/")[2:3] and int(o.split("/")[2]) in pids]


def files_outside(srv) -> dict[str, int]:
    """Every file of the test's directory except the storage, the server's home, the logs and the
    database: what a run could write outside the storage (mtimes, to see a rewrite too)."""
    keep = {srv.paths["storage"], srv.tmp / "prefect-home", srv.tmp / "pg", srv.tmp / "cache"}
    return {str(p): p.stat().st_mtime_ns for p in srv.tmp.rglob("*")
            if p.is_file() and not any(k in p.parents for k in keep) and "__pycache__" not in p.parts
            and not p.name.endswith((".log", ".txt", ".png"))}


def test_every_forbidden_request_is_refused_before_anything_runs(team):
    srv = team
    tried = attempts(srv)
    before, started = files_outside(srv), time.time()
    ids = {}
    for name, (deployment, params, _) in tried.items():
        made = prefect(srv, "deployment", "run", deployment, "--params", json.dumps(params))
        assert made.returncode == 0, (name, made.stdout + made.stderr)
        ids[name] = re.search(r"UUID: ([0-9a-f-]{36})", made.stdout).group(1)
    watched = prefect(srv, "deployment", "run", "evaluate/evaluate", "--watch", "--params",
                      json.dumps({"config": {**tried["local-executor"][1]["config"], "limit": 1}}))
    deadline = time.monotonic() + 600
    runs = {}
    while len(runs) < len(ids):
        assert time.monotonic() < deadline, f"runs still going: {set(ids) - set(runs)}"
        for name, run_id in ids.items():
            run = srv.api(f"/flow_runs/{run_id}", method="GET")
            if run["state_type"] in FINAL:
                runs[name] = run
        time.sleep(2)
    finished = time.time()
    for name, run in runs.items():
        phrase = tried[name][2]
        message = run["state"]["message"] or ""
        print(f"{name}: {run['state_type']}: {' '.join(message.split())[:400]}")
        assert run["state_type"] == "FAILED" and "refused by the worker on" in message and phrase in message, \
            (name, run["state_type"], message)
        assert "before anything ran" in message and "Traceback" not in message
    for name in ("local-executor", "symlink-escape", "dotdot-label"):  # the parent's summary artifact says it
        (summary,) = srv.api("/artifacts/filter", {"artifacts": {"flow_run_id": {"any_": [runs[name]["id"]]},
                                                                 "key": {"like_": "summary-"}}})
        assert "refused by the worker on" in summary["data"] and summary["description"].startswith("refused by")
    out = watched.stdout + watched.stderr
    lines = [ln for ln in out.splitlines() if "refused by the worker on" in ln]
    print("--watch:", *lines[:2], sep="\n")
    # one line each, no traceback: the exception that ended the run, and the state it ended in
    assert watched.returncode == 1 and len(lines) <= 2 and "Traceback" not in out, out[-3000:]
    assert "RunRefused: refused by the worker on" in lines[0] and "unexpected exception" not in out, lines
    assert lines[-1].endswith("Finished in state Failed: refused by the worker on " + socket.gethostname()
                              + " before anything ran"), lines
    pids = {int(str(r["infrastructure_pid"]).rsplit(":", 1)[-1]) for r in runs.values() if r.get("infrastructure_pid")}
    assert pids, "the runs' processes are not known"
    assert started_containers(started, finished, pids) == [], "a refused run started a container"
    deadline = time.monotonic() + 30
    while alive(pids) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not alive(pids), f"processes of refused runs left: {alive(pids)}"
    assert files_outside(srv) == before, "a refused run wrote outside the storage"
    assert not (srv.paths["outside"] / "run").exists() and not Path("/etc/codeeval-metrics.json").exists()


def test_an_api_key_parameter_is_refused_before_the_server_keeps_it(team):
    srv = team
    params = {"config": {"model": "gpt-x", "tasks": ["humaneval"], "backend": "openai", "limit": 1,
                         "generation_only": True, "backend_options": {"api_key": PLANTED}}}
    made = prefect(srv, "deployment", "run", "evaluate/evaluate", "--params", json.dumps(params))
    said = " ".join((made.stdout + made.stderr).split())
    print(said[-600:])
    assert made.returncode != 0 and "an API key is never a deployment parameter" in said, said[-3000:]
    assert "OPENAI_API_KEY" in said and "Secret block" in said and PLANTED not in said
    time.sleep(3)  # whatever the server would write about it is written by now
    places = {"server log": (srv.tmp / "server.log").read_bytes(),
              "worker logs": b"".join(p.read_bytes() for p in srv.tmp.glob("worker-*.log")),
              "artifacts": json.dumps(srv.api("/artifacts/filter", {})).encode(),
              "flow runs": json.dumps(srv.api("/flow_runs/filter", {})).encode(),
              "storage": b"".join(p.read_bytes() for p in srv.paths["storage"].rglob("*") if p.is_file())}
    if srv.database == "sqlite":
        places["database"] = b"".join(p.read_bytes() for p in (srv.tmp / "prefect-home").glob("prefect.db*"))
    else:
        url = srv.env["PREFECT_SERVER_DATABASE_CONNECTION_URL"].replace("postgresql+asyncpg", "postgresql")
        dump = subprocess.run(["pg_dump", url], capture_output=True, timeout=120)
        assert dump.returncode == 0, dump.stderr[-2000:]
        places["database"] = dump.stdout
    found = [where for where, data in places.items() if PLANTED.encode() in data]
    assert not found, f"the planted key is in: {found}"


def test_a_model_label_with_html_is_text_on_the_leaderboard(team):
    """The nightly deployment on the models file of the worker's data root (a replayed model whose
    label holds an <img> tag): the page shows the label as text and runs none of it."""
    srv = team
    made = prefect(srv, "deployment", "run", "nightly-leaderboard/nightly-leaderboard", "--watch", "--params",
                   json.dumps({"models_file": str(srv.paths["data"] / "models.yaml")}), timeout=600)
    assert made.returncode == 0, (made.stdout + made.stderr)[-3000:]
    ran = {str(p): json.loads(p.read_text())["codeeval"].get("sandboxes")
           for p in srv.paths["storage"].rglob("results.json")}
    assert ran and all([(s["executor"], s["runtime"]) for s in sandboxes or []] == [("docker", "runsc")]
                       for sandboxes in ran.values()), ran  # the worker's default, which it requires
    page = srv.paths["storage"] / "leaderboard" / "index.html"  # the deployment's relative output_dir
    html = page.read_text()
    assert "&lt;img src=x onerror=" in html and "<img src=x" not in html
    if CHROMIUM and srv.database == "sqlite":
        dom = chromium_page(page.as_uri(), srv.tmp, "leaderboard-html-label.png")
        assert "&lt;img src=x onerror=" in dom and "<img src=\"x\"" not in dom and "<title>1</title>" not in dom


def test_the_ui_asks_for_the_credential_then_shows_the_runs(team):
    if team.database != "sqlite" or not CHROMIUM:
        pytest.skip("the UI is checked once, on SQLite, where Chromium is installed")
    login, runs = ui_login(team)
    assert "Login" in login and "admin:pass" in login, login[:2000]
    assert "Runs" in runs and re.search(r"\w+-\w+", runs), runs[:2000]
    assert any(name in runs for name in ("replayed", "reference", "nightly-models")), runs[:3000]


def ui_login(srv) -> tuple[str, str]:
    """The UI's first page (the login form), then, after the credential is typed into it and sent,
    its Runs page; the text of each, and a screenshot of each kept (team_server.SCREENSHOTS)."""
    import asyncio

    async def drive(page) -> tuple[str, str]:
        async def until(condition: str, seconds: float = 60) -> None:
            end = time.monotonic() + seconds
            while not await page.evaluate(condition):
                assert time.monotonic() < end, f"never {condition}: {(await page.evaluate('document.body.innerText'))}"
                await asyncio.sleep(0.5)

        await page.call("Page.navigate", url=f"{srv.ui}/runs")
        await until("!!document.querySelector('input[type=password]')")
        await asyncio.sleep(1)
        login = await page.evaluate("document.body.innerText + ' ' + document.querySelector('input[type=password]')"
                                    ".placeholder")
        await page.screenshot("ui-login.png")
        await page.evaluate("document.querySelector('input[type=password]').focus()")
        await page.call("Input.insertText", text=srv.env["PREFECT_API_AUTH_STRING"])
        await page.evaluate("document.querySelector('button[type=submit]').click()")
        await until("!document.querySelector('input[type=password]')")
        await page.call("Page.navigate", url=f"{srv.ui}/runs")
        await until("document.body.innerText.includes('Runs')")
        await asyncio.sleep(5)  # the list loads from the API
        await page.screenshot("ui-runs-after-login.png")
        return login, await page.evaluate("document.body.innerText")

    return with_page(srv.tmp, "chromium-login", drive)


def test_the_tls_proxy_carries_the_api_and_its_credential(team):
    if team.database != "sqlite":
        pytest.skip("the proxy is checked once, on SQLite")
    srv = team
    tls_port = free_port()
    log = srv.tmp / "tls-proxy.log"
    env = {**srv.env, "TLS_PORT": str(tls_port), "LISTEN": "127.0.0.1", "PUBLIC_NAME": "localhost"}
    proxy = srv.start(str(srv.project / "scripts" / "tls-proxy.sh"), log="tls-proxy.log", extra_env=env)
    cert = Path(srv.env["PREFECT_HOME"]) / "tls" / "cert.pem"
    deadline = time.monotonic() + 120
    while not (cert.exists() and "https://localhost" in log.read_text()):
        assert proxy.poll() is None and time.monotonic() < deadline, log.read_text()[-2000:]
        time.sleep(0.5)
    assert (Path(srv.env["PREFECT_HOME"]) / "tls" / "key.pem").stat().st_mode & 0o077 == 0
    context = ssl.create_default_context(cafile=str(cert))
    api = f"https://localhost:{tls_port}/api"
    deadline = time.monotonic() + 30
    while True:
        try:
            assert answer(api + "/flow_runs/filter", context=context) == 401
            break
        except urllib.error.URLError:
            assert time.monotonic() < deadline, log.read_text()[-2000:]
            time.sleep(0.5)
    assert answer(api + "/flow_runs/filter", basic_auth(srv.env["PREFECT_API_AUTH_STRING"]), context) == 200
    with pytest.raises(urllib.error.URLError):  # the certificate is checked
        answer(api + "/flow_runs/filter", context=ssl.create_default_context())
    client = {**srv.env, "PREFECT_API_URL": api, "PREFECT_API_SSL_CERT_FILE": str(cert)}
    listed = subprocess.run([str(Path(sys.executable).with_name("prefect")), "deployment", "ls"], env=client,
                            capture_output=True, text=True, timeout=120)
    assert listed.returncode == 0 and "evaluate/evaluate" in listed.stdout, listed.stdout + listed.stderr
    os.killpg(proxy.pid, signal.SIGTERM)
    proxy.wait(timeout=30)
