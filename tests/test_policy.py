"""The worker's policy for deployment runs (codeeval/pipeline/policy.py): each thing a caller may
ask and the worker has not allowed is refused, by name, with what would allow it; the rest passes.
The same refusals on a real server, through workers, are tests/test_team_security.py's."""
from __future__ import annotations

import os
from dataclasses import replace

import pytest

from codeeval.executors import SandboxSpec
from codeeval.executors.base import Limits
from codeeval.generation import BackendSpec
from codeeval.generation.base import GenerationArgs
from codeeval.pipeline.config import RunConfig
from codeeval.pipeline.policy import WorkerPolicy, config_request, nightly_request, shard_request


@pytest.fixture
def site(tmp_path):
    data, store, outside = tmp_path / "data", tmp_path / "store", tmp_path / "outside"
    for d in (data, store, outside):
        d.mkdir()
    (outside / "secret.txt").write_text("not yours")
    (data / "escape").symlink_to(outside)  # a link inside a root that points outside
    env = {"CODEEVAL_STORAGE": str(store), "CODEEVAL_DATA_ROOTS": str(data), "CODEEVAL_WORKER_MAX_WORKERS": "2"}
    return data, store, outside, env


def refused(env: dict, config: RunConfig) -> list[str]:
    policy = WorkerPolicy.from_env(env)
    return policy.refusals(config_request(policy.anchored(config)))


def test_an_ordinary_run_inside_the_roots_passes(site):
    data, store, _, env = site
    config = RunConfig(model="reference", tasks=["humaneval"], allow_code_execution=True, data_dir=str(data),
                       output_dir="team-run", n_workers=2)
    assert refused(env, config) == []
    assert WorkerPolicy.from_env(env).anchored(config).output_dir == str(store / "team-run")


def test_relative_output_files_land_in_each_runs_own_directory(site):
    """Two runs that both save generations.json and metrics.json (another model; the same model with
    other params) keep their own: each inside its run directory, not at the storage root that every
    run shares; an absolute path or a URL stays as the caller gave it."""
    data, store, _, env = site
    policy = WorkerPolicy.from_env(env)
    base = RunConfig(model="reference", tasks=["humaneval"], allow_code_execution=True, data_dir=str(data),
                     save_generations=True, metric_output_path="out/metrics.json")
    runs = [base, replace(base, model="replayed", load_generations_path=str(data / "g.json")), replace(base, limit=3)]
    anchored = [policy.anchored(c) for c in runs]
    for config, run in zip(runs, anchored):
        assert run.save_generations_path == str(store / config.run_id / "generations.json")
        assert run.metric_output_path == str(store / config.run_id / "out" / "metrics.json")
        assert policy.refusals(config_request(run)) == []
    assert len({r.metric_output_path for r in anchored}) == 3
    named = policy.anchored(replace(base, output_dir="team-run"))
    assert named.save_generations_path == str(store / "team-run" / "generations.json")
    own = replace(base, save_generations_path=str(store / "g.json"), metric_output_path="s3://bucket/m.json")
    assert policy.anchored(own).save_generations_path == str(store / "g.json")
    assert policy.anchored(own).metric_output_path == "s3://bucket/m.json"


@pytest.mark.parametrize("change,phrase", [
    ({"executor": "local"}, "executor 'local' runs model output outside the Docker sandbox (allow: local-executor)"),
    ({"generation": GenerationArgs(trust_remote_code=True)}, "trust_remote_code runs the model repository's Python"),
    ({"output_dir": "/tmp"}, "output_dir '/tmp' is outside this worker's storage"),
    ({"metric_output_path": "/etc/cron.d/x"}, "metric_output_path '/etc/cron.d/x' is outside this worker's storage"),
    ({"load_generations_path": "OUTSIDE/secret.txt"}, "is outside this worker's data roots"),
    ({"load_generations_path": "DATA/escape/secret.txt"}, "is outside this worker's data roots"),
    ({"data_dir": "DATA/../outside"}, "climbs out of its directory with '..'"),
    ({"output_dir": "../elsewhere"}, "climbs out of its directory with '..'"),
    ({"source_code_root": "/"}, "source_code_root '/' is outside this worker's data roots"),
    ({"tasks": ["../../x"]}, "tasks[0] '../../x' would become a path outside its directory"),
    ({"model": "../../models/m", "load_generations_path": "DATA/g.json"}, "model '../../models/m' would become a path"),
    ({"n_workers": 64}, "n_workers 64 is over this worker's cap of 2"),
    ({"memory_mb": 65536}, "memory_mb 65536 is over this worker's cap of 4096"),
    ({"backend": "openai", "backend_options": {"api_key": "sk-planted"}}, "an API key is never a parameter"),
    ({"model": "/opt/models/m"}, "model '/opt/models/m' is outside this worker's data roots"),
])
def test_each_forbidden_request_is_refused_by_name(site, change, phrase):
    data, _, outside, env = site
    for key, value in change.items():
        if isinstance(value, str):
            change[key] = value.replace("OUTSIDE", str(outside)).replace("DATA", str(data))
    config = RunConfig(model="reference", tasks=["humaneval"], allow_code_execution=True, data_dir=str(data))
    import dataclasses

    lines = refused(env, dataclasses.replace(config, **change))
    assert len(lines) == 1 and phrase in lines[0], lines
    assert "sk-planted" not in " ".join(lines)


def test_the_worker_allows_by_name(site):
    data, _, outside, env = site
    config = RunConfig(model="reference", tasks=["humaneval"], executor="local", data_dir=str(outside),
                       generation=GenerationArgs(trust_remote_code=True), n_workers=64, memory_mb=65536)
    assert len(refused(env, config)) == 5
    allowed = {**env, "CODEEVAL_WORKER_ALLOW": "local-executor, trust-remote-code,any-path,over-caps"}
    assert refused(allowed, config) == []
    assert len(refused({**env, "CODEEVAL_WORKER_ALLOW": "local-executor"}, config)) == 4


def test_shard_and_nightly_requests(site):
    data, store, outside, env = site
    policy = WorkerPolicy.from_env(env)
    run = store / "r1" / "humaneval"
    ok = shard_request({"problems_path": str(run / "problems.parquet"), "out_path": str(run / "executions/s.parquet")},
                       sandbox=SandboxSpec("docker", 2, Limits()), name="humaneval")
    assert policy.refusals(ok) == []
    bad = shard_request({"problems_path": str(outside / "secret.txt"), "out_path": str(outside / "x.parquet")},
                        sandbox=SandboxSpec("local", 2, Limits(nproc=100000)), name="../x")
    lines = policy.refusals(bad)
    assert len(lines) == 5, lines  # executor, name, the read, the write, nproc over its default
    gen = shard_request({"problems_path": str(run / "problems.parquet"), "out_path": str(run / "g.parquet")},
                        backend=BackendSpec("transformers", str(outside), GenerationArgs(trust_remote_code=True),
                                            options=(("api_key", "k"),)))
    assert len(policy.refusals(gen)) == 3  # the key, trust_remote_code, the model outside the roots
    assert policy.refusals(nightly_request(str(data / "models.yaml"), policy.output("board"),
                                           policy.output("runs"))) == []
    assert len(policy.refusals(nightly_request(str(outside / "models.yaml"), "/tmp/board", "/tmp/runs"))) == 3


def test_without_storage_runs_stay_in_the_workers_runs_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    policy = WorkerPolicy.from_env({})
    assert policy.storage_root == tmp_path / "runs" and policy.data_roots == ()
    config = RunConfig(model="reference", tasks=["humaneval"], allow_code_execution=True)
    assert policy.refusals(config_request(policy.anchored(config))) == []
    assert os.cpu_count() and policy.max_workers == os.cpu_count()


def test_an_api_key_block_is_read_where_the_shard_runs(prefect_api):
    """backend_options.api_key_block names a Prefect Secret block: the shard reads its value on its
    own host, into the backend's spec in memory (tasks/secrets.py); the parameter holds the name."""
    from prefect.blocks.system import Secret

    from codeeval.generation.api.openai_backend import OpenAIBackend
    from codeeval.tasks.secrets import with_secrets

    Secret(value="sk-from-the-block").save("codeeval-test-openai-key", overwrite=True)
    spec = BackendSpec("openai", "gpt-x", options=(("api_key_block", "codeeval-test-openai-key"),
                                                    ("base_url", "http://127.0.0.1:9/v1")))
    resolved = with_secrets(spec)
    assert dict(resolved.options) == {"api_key": "sk-from-the-block", "base_url": "http://127.0.0.1:9/v1"}
    assert OpenAIBackend(resolved).api_key == "sk-from-the-block"
    plain = BackendSpec("openai", "gpt-x")
    assert with_secrets(plain) is plain
