"""A shard's names come from its ShardId through one RunLayout, and the ShardId travels intact
as a work-pool flow run's JSON parameter; the CLI's plan is the one the load stage uses."""
from __future__ import annotations

import json

import pytest

from codeeval.core.artifacts import RunLayout
from codeeval.core.contracts import ShardId


def test_a_shard_names_its_run_and_files_in_one_place(tmp_path):
    layout = RunLayout(tmp_path)
    gen, ex = ShardId("humaneval", "generate", 3), ShardId("humaneval", "execute", 3)
    assert layout.run_name(gen) == "generate-humaneval-shard-003"
    assert layout.run_name(ShardId("mbpp", "execute", 1234)) == "execute-mbpp-shard-1234"
    assert layout.output(gen) == tmp_path / "humaneval" / "generations" / "shard-00003.parquet"
    assert layout.output(ex) == tmp_path / "humaneval" / "executions" / "shard-00003.parquet"
    assert layout.error_record(ex) == tmp_path / "humaneval" / "errors" / "execute-shard-00003.json"
    assert layout.wait_record(ex) == tmp_path / "humaneval" / "waits" / "execute-shard-00003.json"
    assert layout.error_record(ex).parent == layout.errors("humaneval")
    assert layout.wait_record(ex).parent == layout.waits("humaneval")
    # every shard of a run has its own names: none collide across tasks, stages or indices
    shards = [ShardId(t, s, i) for t in ("humaneval", "humaneval-plus") for s in ("generate", "execute")
              for i in range(3)]
    for name in (layout.run_name, layout.output, layout.error_record):
        assert len({name(s) for s in shards}) == len(shards)
    with pytest.raises(ValueError, match="stage"):
        ShardId("humaneval", "../../etc", 0)  # a flow run's parameter names a folder: only the stages


def test_a_shard_id_is_a_json_parameter_of_the_stage_flows():
    from pydantic import TypeAdapter

    from codeeval.flows.stages import execute_stage, generate_stage

    shard = ShardId("humaneval", "execute", 7)
    sent = json.loads(json.dumps(TypeAdapter(ShardId).dump_python(shard, mode="json")))  # as the server stores it
    assert sent == {"task": "humaneval", "stage": "execute", "index": 7}
    for stage in (generate_stage, execute_stage):
        assert stage.parameters.properties["shard"]  # in the deployment's parameter schema
    received = execute_stage.validate_parameters({
        "shard": sent, "run_dir": "/r", "problems_path": "/r/p", "generations_path": "/r/g",
        "sandbox": {"name": "docker", "n_workers": 0, "limits": {}}, "cache_key": "k"})
    assert received["shard"] == shard and isinstance(received["shard"], ShardId)


def test_the_load_stage_takes_the_plan_the_cli_handed_to_the_flow_once(data_dir):
    from codeeval.flows.evaluate import evaluate
    from codeeval.pipeline import plan
    from codeeval.pipeline.config import RunConfig

    config = RunConfig(model="reference", tasks=["humaneval"], limit=3, data_dir=str(data_dir),
                       allow_code_execution=True)
    handed = plan.RunPlans.of(config, plan.plan_run(config))
    made = handed.plans["humaneval"]
    # the flow's parameters as Prefect validates them in this process, and as it stores them
    received = evaluate.validate_parameters({"config": config.to_dict(), "plans": handed})
    assert received["plans"] is handed
    stored = evaluate.serialize_parameters(received)["plans"]
    assert stored == {"config": handed.config, "tasks": ["humaneval"]}  # no problem in the flow run's record
    assert received["plans"].take(received["config"], "humaneval") is made
    assert handed.take(config, "humaneval") is None  # once: a second run in this process reads its data again
    retried = evaluate.validate_parameters({"config": config.to_dict(), "plans": stored})["plans"]
    assert retried.plans == {} and retried.take(config, "humaneval") is None  # the UI's retry plans anew
    other = RunConfig(model="reference", tasks=["humaneval"], limit=2, data_dir=str(data_dir))
    handed = plan.RunPlans.of(other, plan.plan_run(other))
    anchored = RunConfig.from_dict({**other.to_dict(), "limit": 3})  # a worker's policy changed the config
    assert handed.take(anchored, "humaneval") is None  # another config's plan is never taken
    assert len(handed.take(other, "humaneval").problems) == 2
