"""A team's set-up from the installed package alone, from any directory (docs/deployment.md):
`codeeval server start` (codeeval/team_server.py), `codeeval deploy` (the gpu and cpu work pools
and the deployments of the prefect.yaml this package carries, plus a starter models file) and
`codeeval models fetch smollm2`. A server that does not answer or refuses the credential is one
line, within seconds, before anything is changed."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from codeeval.core.errors import UsageError

TEAM = Path(__file__).parent / "flows" / "deployments"  # package data: prefect.yaml, models.yaml
POOLS = ("gpu", "cpu")  # generation of a model's weights; everything else (prefect.yaml)
NIGHTLY = "nightly-leaderboard"


def command(args) -> int:
    if args.command == "server":
        from codeeval import team_server

        team_server.start(args.host, args.port, args.public_url, args.database)
    if args.command == "deploy":
        return deploy(Path(args.models_file), args.nightly_cron, args.working_dir and Path(args.working_dir))
    return fetch_model(args.dir, args.hf)


def fetch_model(directory: Path | None, hf: Path | bool | None) -> int:
    from codeeval.generation.models import smollm2

    target = (directory or smollm2.default_dir()).expanduser().absolute()
    try:
        gguf = smollm2.fetch(target)
        print(smollm2.dequantize(gguf, smollm2.hf_dir(target) if hf is True else hf) if hf else gguf)
    except smollm2.FetchFailed as exc:
        print(f"fetch-smollm2: {exc}", file=sys.stderr)
        return 1
    return 0


def check_server() -> str:
    """The API URL, once the server there answered this client's credential; else one line why not."""
    import httpx
    from prefect.settings import get_current_settings

    api = get_current_settings().api
    if not api.url:
        raise UsageError("PREFECT_API_URL is not set: the server's API, e.g. http://cpu-host:4200/api "
                         "(`codeeval server start` prints it)")
    url = api.url.rstrip("/")
    auth = api.auth_string.get_secret_value() if hasattr(api.auth_string, "get_secret_value") else api.auth_string
    verify = False if api.tls_insecure_skip_verify else (api.ssl_cert_file or True)
    try:
        with httpx.Client(timeout=10, verify=verify, auth=tuple(auth.split(":", 1)) if auth else None) as client:
            answer = client.post(f"{url}/work_pools/filter", json={"limit": 1})
    except httpx.HTTPError as exc:
        raise UsageError(f"no Prefect server answers at {url} ({type(exc).__name__}: {exc}): start one "
                         "(`codeeval server start`) or set PREFECT_API_URL") from None
    if answer.status_code == 401:
        raise UsageError(f"the server at {url} refused this client (401): set PREFECT_API_AUTH_STRING to its "
                         "credential, the content of the api-credential file `codeeval server start` made")
    if answer.status_code >= 400:
        raise UsageError(f"the server at {url} answered {answer.status_code} to a work pool query: is it a "
                         f"Prefect 3 API? {answer.text[:200]}")
    return url


def ensure_pools() -> list[str]:
    """The gpu and cpu process pools; those already there are kept as they are (limits included)."""
    from prefect import get_client
    from prefect.client.schemas.actions import WorkPoolCreate
    from prefect.exceptions import ObjectNotFound
    from prefect.workers.process import ProcessWorker

    made = []
    with get_client(sync_client=True) as client:
        for name in POOLS:
            try:
                client.read_work_pool(name)
            except ObjectNotFound:
                client.create_work_pool(WorkPoolCreate(
                    name=name, type="process", base_job_template=ProcessWorker.get_default_base_job_template()))
                made.append(name)
    return made


def deployments(models_file: Path, nightly_cron: str | None, working_dir: Path | None) -> dict:
    """The carried prefect.yaml with this team's models file, cron and working directory."""
    import yaml

    spec = yaml.safe_load((TEAM / "prefect.yaml").read_text())
    for deployment in spec["deployments"]:
        if working_dir is not None:
            deployment["work_pool"].setdefault("job_variables", {})["working_dir"] = str(working_dir)
        if deployment["name"] == NIGHTLY:
            deployment["parameters"]["models_file"] = str(models_file)
            if nightly_cron:
                (schedule,) = deployment["schedules"]
                schedule["cron"] = nightly_cron
    return spec


def deploy(models_file: Path, nightly_cron: str | None, working_dir: Path | None) -> int:
    import yaml

    url = check_server()
    models_file = models_file.expanduser().absolute()
    spec = deployments(models_file, nightly_cron, working_dir and working_dir.expanduser().absolute())
    if not models_file.exists():
        models_file.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(TEAM / "models.yaml", models_file)
        print(f"codeeval: wrote a starter models file to {models_file} (edit it there: the nightly reads it)")
    made = ensure_pools()
    with tempfile.TemporaryDirectory(prefix="codeeval-deploy-") as tmp:
        (Path(tmp) / "prefect.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
        # prefect's own deploy (schedules, parameter schemas, updates in place), on the written file;
        # in a directory of its own, where it may leave its .prefect/ files
        done = subprocess.run([sys.executable, "-m", "prefect", "--no-prompt", "deploy", "--all", "--prefect-file",
                               "prefect.yaml"], cwd=tmp, capture_output=True, text=True,
                              env={**os.environ, "COLUMNS": "200"})
    if done.returncode != 0:
        lines = [line.strip() for line in (done.stdout + done.stderr).splitlines() if line.strip()]
        raise UsageError(f"prefect deploy failed on {url}: {' '.join(lines[-3:])}")
    print(f"codeeval: work pools {', '.join(POOLS)} on {url}" + (f" (made {', '.join(made)})" if made else ""))
    for deployment in spec["deployments"]:
        pool = deployment["work_pool"]["name"]
        cron = [f", {s['cron']} UTC" for s in deployment.get("schedules") or []]
        print(f"codeeval: deployed {deployment['name']} ({deployment['entrypoint']}) on the {pool} pool"
              + "".join(cron))
    return 0
