"""docs/deployment.md's team path from the package alone, run as written: every `bash` block of
its sections 1 to 5, with no checkout on any "host". The wheel built from this commit's files is
installed into a fresh venv outside the checkout by section 1's block (torch first, then the wheel
with the constraints it carries; once a session, shared with tests/test_wheel.py: the
installed_wheel fixture, which fails a test that changes that venv), `codeeval server start` serves on PostgreSQL (tests/team_server.py start_postgres),
`codeeval deploy` makes the pools and deployments (twice: it is idempotent), and a gpu and a cpu
worker run from that venv in two homes with caches of their own and one shared storage. Then the
reference scored through `prefect deployment run --watch`, a broken model explained by its cause,
and the nightly fired by the server's scheduler with nobody watching. The server's log holds no
ERROR line. The docs' host names and paths are the only things replaced: the server's URL by a
free port's, /opt/codeeval, /srv/codeeval/prefect, /shared/codeeval and the database URL by the
test's, and the cron by one due within two minutes."""
from __future__ import annotations

import datetime as dt
import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from classifier_models import FIXTURES, ensure_tiny_roberta
from docker_env import REPO, ensure_images
from team_server import STOP_S, Server, free_port, start_postgres
from wheel_env import DOCS_VENV, clean_env, substitute, team_blocks

pytestmark = pytest.mark.skipif(not (REPO / ".git").exists(), reason="needs the git checkout (its file list)")

def cron_of(when: dt.datetime) -> str:
    return f"{when.minute} {when.hour} * * *"


def nightly_at(when: dt.datetime) -> dict:
    """The substitution that sets the deploy block's nightly schedule to `when` (UTC)."""
    return {'--nightly-cron "0 2 * * *"': f'--nightly-cron "{cron_of(when)}"'}


def test_the_team_path_from_the_wheel_runs_as_written(installed_wheel, tmp_path, data_dir, smollm2_dir):
    started = time.monotonic()
    blocks = team_blocks()
    checkout_image = ensure_images()
    shared = tmp_path / "shared"
    shutil.copytree(data_dir, shared / "data", copy_function=os.link)  # the team's data on the shared path
    # section 1 ("every host"), run as written once for the session: wheel_env.install
    venv, prefect_home, port = installed_wheel.venv, tmp_path / "prefect-home", free_port()
    db_setting, stop_db = start_postgres(tmp_path)
    url = f"127.0.0.1:{port}"
    replace = {DOCS_VENV: str(venv), "/srv/codeeval/prefect": str(prefect_home),
               "postgresql+asyncpg://prefect:SECRET@db-host:5432/prefect": db_setting[
                   "PREFECT_SERVER_DATABASE_CONNECTION_URL"],
               "/shared/codeeval": str(shared), "cpu-host:4200": url, "--port 4200": f"--port {port}"}
    for old in replace:
        assert old in "".join(blocks.values()), old
    srv = Server(env=clean_env(PREFECT_API_URL=f"http://{url}/api", PREFECT_HOME=str(prefect_home)), tmp=tmp_path,
                 project=tmp_path, database="postgresql")
    tests_env = {"PREFECT_WORKER_QUERY_SECONDS": "2", "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "DO_NOT_TRACK": "1",
                 "COLUMNS": "250"}  # what the test adds: faster polling, no analytics; nothing of the docs'

    def bash(host: str, *, cwd: Path, log: str, background: bool = False, extra: dict | None = None, **more):
        script = tmp_path / f"{log}.sh"
        script.write_text(substitute(blocks[host], {**replace, **more}))
        env = clean_env(**tests_env, **(extra or {}))
        proc = subprocess.Popen(["bash", str(script)], cwd=cwd, env=env, start_new_session=True,
                                stdout=open(tmp_path / f"{log}.log", "w"), stderr=subprocess.STDOUT)
        srv.procs.append(proc)
        if background:  # the block leaves its server or worker running in its process group
            return proc
        code = proc.wait(timeout=900)
        out = (tmp_path / f"{log}.log").read_text()
        assert code == 0, f"{host}: exit {code}\n{out[-4000:]}"
        return out

    try:
        codeeval = venv / "bin" / "codeeval"
        where = installed_wheel.imported_from(tmp_path)
        assert where.startswith(str(venv) + "/"), where  # not the checkout

        bash("the server host", cwd=tmp_path, log="server", background=True,
             extra={"PREFECT_SERVER_SERVICES_SCHEDULER_LOOP_SECONDS": "5"})  # the scheduler looks every 5 s
        parked = dt.datetime.now(dt.timezone.utc) + dt.timedelta(hours=6)  # not during the test: moved below
        for attempt in ("deploy", "deploy-again"):  # idempotent: the second updates what the first made
            said = bash("once, from any host", cwd=tmp_path, log=attempt, **nightly_at(parked))
            assert ("made gpu, cpu" in said) == (attempt == "deploy"), said
            assert "deployed nightly-leaderboard (codeeval.flows.nightly.nightly_leaderboard) on the cpu pool" in said
        srv.authorize()
        (nightly,) = srv.api("/deployments/filter", {"deployments": {"name": {"any_": ["nightly-leaderboard"]}}})
        assert [s["schedule"]["cron"] for s in nightly["schedules"]] == [cron_of(parked)]
        deployments = srv.api("/deployments/filter", {})
        assert len(deployments) == 7 and all(d["pull_steps"] == [] for d in deployments), deployments
        assert nightly["parameters"]["models_file"] == str(shared / "models.yaml")
        starter = shared / "models.yaml"  # written by deploy; the team sets its data_dir, as the file says
        text = starter.read_text()
        assert "- model: reference" in text
        # and a classification task, fine-tuned on the gpu pool: a tiny RoBERTa on CodeDefect's fixture
        tiny = ensure_tiny_roberta(shared / "models" / "tiny-roberta")
        shutil.copytree(FIXTURES / "codedefect", shared / "data" / "codedefect")
        classify = {"model": str(tiny), "tasks": ["codedefect"], "limit": 5, "training": {"num_epochs": 1}}
        starter.write_text(re.sub(r"# data_dir: \S+", f"data_dir: {shared / 'data'}", text)
                           + f"  - {json.dumps(classify)}\n")

        homes = {pool: tmp_path / f"home-{pool}" for pool in ("gpu", "cpu")}
        for pool, home in homes.items():
            home.mkdir()
            bash(f"each {pool.upper()} host", cwd=home, log=f"worker-{pool}", background=True,
                 extra={"HOME": str(home)})
            srv.workers.append((srv.procs[-1], tmp_path / f"worker-{pool}.log"))

        said = bash("anywhere with the package", cwd=tmp_path, log="evaluate")
        assert re.search(r"humaneval\s+pass@1=1\.0000 ± 0\.0000\s+\(4/4 samples passed", said), said[-3000:]
        assert "Completed" in said, said[-3000:]
        for name in ("generate-humaneval-shard-000", "execute-humaneval-shard-001"):  # the nightly's too, by now
            shards = srv.flow_runs(name={"any_": [name]})
            assert "COMPLETED" in {s["state_type"] for s in shards}, shards
            assert {s["work_pool_name"] for s in shards} == {"cpu"}, shards  # the reference loads no weights

        # a classification task: trained, then predicted, on the gpu pool (the same run as the nightly's entry)
        params = {"config": {**classify, "allow_code_execution": True, "data_dir": str(shared / "data")}}
        done = subprocess.run([venv / "bin" / "prefect", "deployment", "run", "evaluate/evaluate", "--watch",
                               "--params", json.dumps(params)], cwd=tmp_path, env={**srv.env, **tests_env},
                              capture_output=True, text=True, timeout=900)
        said = done.stdout + done.stderr
        assert done.returncode == 0 and re.search(r"codedefect\s+accuracy=\d\.\d{4} ± \d\.\d{4}\s+macro_f1=", said), \
            said[-3000:] + (tmp_path / "worker-gpu.log").read_text()[-3000:]
        assert "reused 0/1 trainings and 0/1 prediction shards" in said, said[-3000:]
        for name in ("train-codedefect", "predict-codedefect-shard-000"):  # (the nightly is not due yet)
            stages = srv.flow_runs(name={"any_": [name]})
            assert [(s["work_pool_name"], s["state_type"]) for s in stages] == [("gpu", "COMPLETED")], stages
        evaluated = float(re.search(r"codedefect\s+accuracy=(\d\.\d{4})", said).group(1))

        # the team moves the nightly to the coming minutes by deploying again: after the evaluation above,
        # so that the nightly's CodeDefect entry finds that training finished (two at once would both train)
        due = (dt.datetime.now(dt.timezone.utc) + dt.timedelta(seconds=150)).replace(second=0, microsecond=0)
        said = bash("once, from any host", cwd=tmp_path, log="deploy-due", **nightly_at(due))
        assert "made gpu, cpu" not in said, said
        (nightly,) = srv.api("/deployments/filter", {"deployments": {"name": {"any_": ["nightly-leaderboard"]}}})
        assert [s["schedule"]["cron"] for s in nightly["schedules"]] == [cron_of(due)]

        # a model that cannot load: generated on the gpu pool, its cause on the terminal
        broken = shared / "broken-model"
        broken.mkdir()
        (broken / "config.json").write_text(json.dumps({"model_type": "no-such-architecture"}))
        run_broken = blocks["anywhere with the package"].replace('"model": "reference"', f'"model": "{broken}"')
        assert run_broken != blocks["anywhere with the package"]
        script = tmp_path / "broken.sh"
        script.write_text(substitute(run_broken, replace))
        done = subprocess.run(["bash", str(script)], cwd=tmp_path, env=clean_env(**tests_env), capture_output=True,
                              text=True, timeout=900)
        flat = " ".join((done.stdout + done.stderr).split())
        cause = "ValueError: Couldn't instantiate the backend tokenizer from one of: (1) a `tokenizers` library"
        assert done.returncode != 0 and "2 shards failed" in flat, flat[-3000:]  # limit 4, 2 per shard
        assert f"generate-humaneval-shard-000: {cause}" in flat, flat[-3000:]
        gpu_shards = [r for r in srv.flow_runs(name={"any_": ["generate-humaneval-shard-000"]})
                      if r["work_pool_name"] == "gpu"]  # a model's weights: the gpu worker's home ran it
        assert [r["state_type"] for r in gpu_shards] == ["FAILED"], gpu_shards

        # one-line errors of `codeeval deploy`: no credential, no server
        nobody = f"http://127.0.0.1:{free_port()}/api"
        for env, said in ((clean_env(PREFECT_API_URL=f"http://{url}/api"), "refused this client (401)"),
                          (clean_env(PREFECT_API_URL=nobody), "no Prefect server answers")):
            t1 = time.monotonic()
            done = subprocess.run([codeeval, "deploy"], cwd=tmp_path, env=env, capture_output=True, text=True,
                                  timeout=120)
            assert done.returncode == 2 and said in done.stderr and done.stderr.count("\n") == 1, done.stderr
            assert time.monotonic() - t1 < 30
        # the small model, fetched by the installed package into a directory of the team's (there: instant)
        models = shared / "models" / "SmolLM2-135M-Instruct"
        shutil.copytree(smollm2_dir, models, copy_function=os.link)
        fetched = subprocess.run([codeeval, "models", "fetch", "smollm2", "--dir", models], cwd=homes["gpu"],
                                 env=clean_env(HOME=str(homes["gpu"])), capture_output=True, text=True, timeout=120)
        assert fetched.returncode == 0 and fetched.stdout.strip().startswith(str(models)), fetched.stderr

        # the nightly: created by the server's scheduler when due, completed by the workers
        deadline = time.monotonic() + (due - dt.datetime.now(dt.timezone.utc)).total_seconds() + 300
        runs: list[dict] = []
        while time.monotonic() < deadline and not runs:
            runs = srv.flow_runs(deployment_id={"any_": [nightly["id"]]},
                                 state={"type": {"any_": ["COMPLETED", "FAILED", "CRASHED"]}})
            time.sleep(3)
        assert runs, "no nightly run finished: " + (tmp_path / "worker-cpu.log").read_text()[-3000:]
        (run,) = runs
        assert run["state_type"] == "COMPLETED", (tmp_path / "worker-cpu.log").read_text()[-3000:]
        assert run["auto_scheduled"] and run["created_by"]["type"] == "SCHEDULE"
        board = shared / "runs" / "leaderboard"  # the deployment's relative output_dir: under the storage
        import pyarrow.parquet as pq

        rows = pq.read_table(board / "leaderboard.parquet").to_pylist()
        primary = {(r["model"], r["task"]): r["value"] for r in rows if r["primary"]}
        assert primary.keys() == {("reference", "humaneval"), (str(tiny), "codedefect")}, primary
        assert primary["reference", "humaneval"] == 1.0 and round(primary[str(tiny), "codedefect"], 4) == evaluated
        (night_run,) = {r["run_dir"] for r in rows if r["task"] == "codedefect"}
        reused = json.loads((Path(night_run) / "results.json").read_text())["codeeval"]["tasks"]["codedefect"]["reused"]
        assert reused == {"train": [1, 1], "predict": [1, 1]}  # the evaluate run's training, never redone
        assert checkout_image in subprocess.run([codeeval, "images", "tags"], env=clean_env(), cwd=tmp_path,
                                                capture_output=True, text=True).stdout

        took = srv.stop_workers()
        slow = {log: round(s, 1) for log, s in took.items() if s > STOP_S}
        assert not slow, f"workers still running {STOP_S:.0f} s after SIGTERM: {slow}"
        errors = srv.log_errors()
        assert not errors, "the server logged errors:\n" + "\n".join(errors[:20])
        print(f"team path from the wheel: install {installed_wheel.install_s:.0f} s (once a session), "
              f"whole test {time.monotonic() - started:.0f} s")
    finally:
        srv.stop_workers()  # a worker stopped so stops the flow runs it started (each in a session of its own)
        srv.kill_all()
        stop_db()
