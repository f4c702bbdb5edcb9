"""The sandbox's OCI runtime (issue 51): `--sandbox-runtime runsc` runs every program under gVisor and
results.json says so beside the image; a worker's CODEEVAL_SANDBOX_RUNTIME is its default, and a host
that requires a runtime refuses any other in one line; an engine without the runtime is one line with
exit 2 before any flow run; 64 shards that start their containers at once on this machine's cores
take turns (CODEEVAL_MAX_CONTAINER_STARTS) and lose no container and no verdict. The verdicts under
gVisor against runc: tests/test_gvisor.py. The deployment worker that requires gVisor:
tests/test_team_security.py."""
from __future__ import annotations

import gzip
import json
import threading

import docker
import pytest
from docker_env import ensure_images

from codeeval.cli import main
from codeeval.executors.base import Program
from codeeval.executors.docker import starts
from codeeval.executors.docker.owners import LABEL
from codeeval.executors.docker.sandbox import DockerSandbox


def cli(capsys, *argv) -> tuple[int, list[str], str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.err.strip().splitlines(), captured.out


@pytest.fixture(scope="module")
def runsc():
    """gVisor as a runtime of the engine: `make test` runs `make engine RUNTIME=runsc` first."""
    ensure_images()
    if "runsc" not in (docker.from_env().info().get("Runtimes") or {}):
        pytest.fail("runsc is not a runtime of this Docker engine: run `make engine RUNTIME=runsc`")


def humaneval(data_dir, n: int) -> list[dict]:
    with gzip.open(data_dir / "humaneval" / "HumanEval.jsonl.gz", "rt") as fh:
        return [json.loads(line) for line in fh][:n]


def run_args(data_dir, out, *extra) -> list[str]:
    return ["run", "--model", "reference", "--tasks", "humaneval", "--limit", "3", "--allow_code_execution",
            "--data-dir", str(data_dir), "--output-dir", str(out), *extra]


@pytest.mark.parametrize("extra,env,line", [
    (["--sandbox-runtime", "kata"], {},
     "codeeval: error: kata is not a runtime of this Docker engine: register it in the engine's daemon.json"),
    ([], {"CODEEVAL_WORKER_REQUIRE_RUNTIME": "runsc"},
     "codeeval: error: this host refuses the run: the sandbox would run under runc, and this worker requires runsc "
     "(CODEEVAL_WORKER_REQUIRE_RUNTIME): --sandbox-runtime runsc, or CODEEVAL_SANDBOX_RUNTIME=runsc on the worker"),
    (["--executor", "local"], {"CODEEVAL_WORKER_REQUIRE_RUNTIME": "runsc"},
     "codeeval: error: this host refuses the run: the sandbox would run under host, and this worker requires runsc"),
    ([], {"CODEEVAL_MAX_CONTAINER_STARTS": "0"},
     "codeeval: error: CODEEVAL_MAX_CONTAINER_STARTS must be a positive integer, not '0'"),
])
def test_a_runtime_the_host_lacks_or_refuses_is_one_line_before_any_flow_run(runsc, data_dir, tmp_path, capsys,
                                                                             monkeypatch, extra, env, line):
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    code, lines, _ = cli(capsys, *run_args(data_dir, tmp_path / "runs" / "r", *extra))
    assert code == 2 and len(lines) == 1 and lines[0].startswith(line), lines
    assert not (tmp_path / "runs").exists()


def test_the_engine_names_runsc_s_set_up_when_it_lacks_it():
    """The line a host without gVisor gets (this engine has it: the function, not the engine, here)."""
    from codeeval.executors.docker.runtimes import missing

    assert missing("runsc") == "runsc is not a runtime of this Docker engine: make engine RUNTIME=runsc"


@pytest.mark.parametrize("how", ["flag", "worker default"])
def test_a_run_under_gvisor_records_its_runtime_beside_the_image(runsc, prefect_api, data_dir, tmp_path, capsys,
                                                                 monkeypatch, how):
    extra = ["--sandbox-runtime", "runsc"] if how == "flag" else []
    if how == "worker default":
        monkeypatch.setenv("CODEEVAL_SANDBOX_RUNTIME", "runsc")
        monkeypatch.setenv("CODEEVAL_WORKER_REQUIRE_RUNTIME", "runsc")  # and it holds what it requires
    out = tmp_path / "r"
    code, _, text = cli(capsys, *run_args(data_dir, out, *extra))
    assert code == 0 and "3/3 samples passed" in text, text
    provenance = json.loads((out / "results.json").read_text())["codeeval"]
    (where,) = provenance["sandboxes"]
    assert where["executor"] == "docker" and where["runtime"] == "runsc", where
    assert where["image"].startswith("codeeval-python:") and where["shards"] == ["humaneval/executions/shard-00000"]


def test_64_shards_starting_at_once_take_turns_and_lose_nothing(runsc, data_dir):
    """64 sandboxes (a worker's 64 execute shards) each start a gVisor container at the same moment
    and run one HumanEval oracle: at most the cap's number of starts are under way at once, every
    container comes up, every oracle passes, and none of the containers is left."""
    problems = humaneval(data_dir, 64)
    outcomes: list = [None] * len(problems)
    errors: list = []
    ids: list = []
    gate = threading.Barrier(len(problems))

    def shard(i: int, record: dict) -> None:
        try:
            program = Program(key=record["task_id"], timeout_s=3.0, code=record["prompt"] + record["canonical_solution"]
                              + "\n" + record["test"] + f"\ncheck({record['entry_point']})\n")
            with DockerSandbox(n_workers=1, container_runtime="runsc") as box:
                ids.append(box.id)
                gate.wait(120)
                (outcomes[i],) = box.run([program])
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(f"{record['task_id']}: {exc!r}")

    starts.peak = 0
    threads = [threading.Thread(target=shard, args=(i, r)) for i, r in enumerate(problems)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(600)
    assert not errors, errors[:5]
    assert [o.status for o in outcomes] == ["passed"] * len(problems), [(o.key, o.status, o.detail) for o in outcomes
                                                                        if o.status != "passed"]
    assert 1 <= starts.peak <= starts.cap(), (starts.peak, starts.cap())
    ours = set(ids)
    # the engine's one listing, not docker-py's list-then-inspect, which fails (404) when another
    # test's container goes between the two
    left = [c["Names"] for c in docker.from_env().api.containers(all=True, filters={"label": LABEL})
            if c["Labels"].get(LABEL) in ours]
    assert len(ours) == len(problems) and not left, left
