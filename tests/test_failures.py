"""Failed-shard inspection on a real Prefect API: a failed shard is a Failed task run under its
own name with a markdown artifact (read back through the API), what waits on it ends Skipped
under its own name (never Pending under a hash), grey in the UI (Cancelled) with the failed shard's
name in its message, the failed run carries no unnamed artifact, infrastructure errors retry and
model errors do not, and `codeeval inspect` prints the same text from the run's files."""
from __future__ import annotations

import json
import re
import time
import uuid
from pathlib import Path

import pytest

from codeeval.cli import main


def flow_run_tasks(flow_name: str, config=None) -> tuple[dict, dict]:
    """The latest flow run called `flow_name-<short run id>`: {task run name: task run},
    {task run name: [artifacts]}, and the artifacts of the flow run itself under "" ."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterFlowRunId, FlowRunFilter, FlowRunFilterName
    from prefect.client.schemas.sorting import FlowRunSort

    with get_client(sync_client=True) as client:
        runs = client.read_flow_runs(flow_run_filter=FlowRunFilter(name=FlowRunFilterName(like_=f"{flow_name}-")),
                                     sort=FlowRunSort.START_TIME_DESC, limit=1)
        assert runs and runs[0].name.startswith(f"{flow_name}-"), f"no flow run {flow_name}-<run id>"
        tasks = {t.name: t for t in client.read_task_runs(flow_run_filter=FlowRunFilter(id={"any_": [runs[0].id]}))}
        found = client.read_artifacts(artifact_filter=ArtifactFilter(
            flow_run_id=ArtifactFilterFlowRunId(any_=[runs[0].id])))
    by_task = {name: [a for a in found if a.task_run_id == t.id] for name, t in tasks.items()}
    by_task[""] = [a for a in found if a.task_run_id is None]
    return tasks, by_task


def settled(flow_name: str, timeout: float = 30.0) -> tuple[dict, dict, list]:
    """flow_run_tasks, the flow run and its logs, once the server has recorded every task run's final
    state, each skipped shard's as the UI shows it (task run states and logs arrive in batches: Cancelled, named Skipped,
    tasks/skips.py) and its log line; as they stand when `timeout` ran out otherwise (the test then
    says what it saw)."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterName, LogFilter
    from prefect.client.schemas.sorting import FlowRunSort

    deadline = time.monotonic() + timeout
    while True:
        tasks, arts = flow_run_tasks(flow_name)
        with get_client(sync_client=True) as client:
            (run,) = client.read_flow_runs(flow_run_filter=FlowRunFilter(
                name=FlowRunFilterName(like_=f"{flow_name}-")), sort=FlowRunSort.START_TIME_DESC, limit=1)
            logs = client.read_logs(log_filter=LogFilter(flow_run_id={"any_": [run.id]}))
        # every task run recorded in a final state (a late batch leaves one Pending, under Prefect's hash
        # name, until its own states arrive), each skipped one as the UI shows it
        shown = tasks and all(t.state.is_final() for t in tasks.values()) and all(
            t.state.type.value == "CANCELLED" for t in tasks.values() if t.state.name == "Skipped")
        if shown and any(log.message.startswith("Finished in state Skipped") for log in logs) \
                or time.monotonic() > deadline:
            return tasks, arts, [run, logs]
        time.sleep(0.5)


def inspect_output(capsys, run_dir: Path) -> str:
    capsys.readouterr()
    assert main(["inspect", str(run_dir)]) == 0
    return capsys.readouterr().out


def test_many_shards_failing_alike_are_one_line(prefect_api, data_dir, tmp_path, capsys):
    """Twelve shards that fail the same way (a model that does not load) end the run in a few
    lines, not one per shard: the first names, how many, the cause once."""
    model = tmp_path / f"broken-{uuid.uuid4().hex[:8]}"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"model_type": "no-such-architecture"}))
    code = main(["run", "--model", str(model), "--tasks", "humaneval", "--limit", "12", "--shard_size", "1",
                 "--allow_code_execution", "--executor", "local", "--data-dir", str(data_dir),
                 "--output-dir", str(tmp_path / "run")])
    err = capsys.readouterr().err
    assert code == 1
    failed = err[err.index("run failed: 12 shards failed"):]
    lines = failed.splitlines()
    assert lines[1].startswith("  generate-humaneval-shard-000, generate-humaneval-shard-001, "
                               "generate-humaneval-shard-002 and 9 more (12 shards): ValueError: ")
    waiting = next(line for line in lines if "not run, waiting on those" in line)
    assert waiting.endswith("execute-humaneval-shard-007 and 5 more")
    assert failed.count("ValueError") == 1


def test_a_model_that_fails_to_load_fails_its_shards_once_and_the_ui_shows_why(prefect_api, data_dir, tmp_path,
                                                                               capsys):
    """A model directory whose config names no architecture: a model failure, never retried."""
    model = tmp_path / f"broken-{uuid.uuid4().hex[:8]}"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"model_type": "no-such-architecture"}))
    out = tmp_path / "run"
    code = main(["run", "--model", str(model), "--tasks", "humaneval", "--limit", "3", "--shard_size", "2",
                 "--allow_code_execution", "--executor", "local", "--infra_retries", "3",
                 "--data-dir", str(data_dir), "--output-dir", str(out)])
    err = capsys.readouterr().err
    assert code == 1
    assert "run failed: 2 shards failed" in err and f"codeeval inspect {out}" in err
    assert "not run, waiting on those: execute-humaneval-shard-000, execute-humaneval-shard-001, score-humaneval" in err
    # the root cause, whole (its reason is on the message's last line), and the warning before it
    cause = ("ValueError: Couldn't instantiate the backend tokenizer from one of: (1) a `tokenizers` library "
             "serialization file,")
    assert f"generate-humaneval-shard-000: {cause}" in err and "sentencepiece or tiktoken installed" in err
    assert "(last warning: You are using a model of type `no-such-architecture`" in err

    tasks, arts, (run, logs) = settled(f"{model.name}-humaneval")
    assert set(tasks) == {"load-humaneval", "generate-humaneval-shard-000", "generate-humaneval-shard-001",
                          "execute-humaneval-shard-000", "execute-humaneval-shard-001", "score-humaneval"}
    for i in (0, 1):
        gen = tasks[f"generate-humaneval-shard-00{i}"]
        assert gen.state.type.value == "FAILED" and gen.run_count == 1  # a model error: no retry
        # not a failure of its own (not red), nor done (not green): grey, saying what it waited on
        ex = tasks[f"execute-humaneval-shard-00{i}"]
        assert (ex.state.type.value, ex.state.name, ex.run_count) == ("CANCELLED", "Skipped", 1)
        assert ex.state.message == f"not run: waiting on generate-humaneval-shard-00{i}, which failed"
    score = tasks["score-humaneval"].state
    assert (score.type.value, score.name, score.message) == (
        "CANCELLED", "Skipped", "not run: waiting on generate-humaneval-shard-000 and generate-humaneval-shard-001, "
                                "which failed")
    assert not [name for name, t in tasks.items() if t.state.type.value == "PENDING"]
    # its log line says the same, without the Completed type its process kept for what waited on it
    assert "Finished in state Skipped('not run: waiting on generate-humaneval-shard-000, which failed')" in \
        [log.message for log in logs if log.task_run_id == tasks["execute-humaneval-shard-000"].id]
    # the run fails as it always did, with its whole message
    assert run.state.type.value == "FAILED" and run.state.message.startswith(
        "Flow run encountered an exception: RunFailed: 2 shards failed (a re-run retries only those;")
    # and every artifact on it says what it is: no unnamed "result" (the pickled exception's record)
    everything = [a for found in arts.values() for a in found]
    assert len(everything) == 3 and all(a.key and a.type == "markdown" for a in everything), \
        [(a.key, a.type, a.task_run_id) for a in everything]

    from codeeval.pipeline.config import RunConfig

    run_id = RunConfig(model=str(model), tasks=["humaneval"], limit=3).run_id
    (summary,) = arts[""]  # on the evaluate run itself: where a person looks first
    assert summary.key == f"summary-{run_id}".lower() and summary.type == "markdown"
    assert f"| humaneval | **failed**: {cause}" in summary.data and "sentencepiece" in summary.data
    assert "### [generate-humaneval-shard-001](http://" in summary.data and "/runs/task-run/" in summary.data
    assert "> Last warning before it: You are using a model of type `no-such-architecture`" in summary.data
    (artifact,) = arts["generate-humaneval-shard-001"]
    assert artifact.key == f"failures-generate-humaneval-shard-001-{run_id}".lower() and artifact.type == "markdown"
    text = artifact.data
    assert "# generate-humaneval-shard-001 failed" in text and "not retried" in text
    assert "| HumanEval/2 | 0 | error |" in text and "HumanEval/0" not in text  # shard 1 = problem 2
    assert f"`{out / 'humaneval' / 'generations' / 'shard-00001.parquet'}`" in text
    assert "ValueError" in text and "```" in text  # the model loader's own error, its traceback tail

    report = inspect_output(capsys, out)
    # the samples it lists with status error are counted as such
    assert ("## humaneval: 0 generation and 0 execution shards written, 2 failed shards (3 samples, status error), "
            "0 failing samples in the shards written, not scored") in report
    assert "#" + text in report  # the artifact's text, one heading level down


def test_an_engine_that_does_not_answer_is_retried_then_fails_the_shard(prefect_api, data_dir, tmp_path,
                                                                        monkeypatch):
    """The Docker engine unreachable (DOCKER_HOST names no socket): infrastructure, retried."""
    from codeeval.core.errors import RunFailed
    from codeeval.flows.evaluate import evaluate
    from codeeval.pipeline.config import RunConfig

    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")
    config = RunConfig(model="reference", tasks=["humaneval"], limit=2, allow_code_execution=True,
                       data_dir=str(data_dir), output_dir=str(tmp_path / "run"), executor="docker",
                       infra_retries=1, retry_delay_s=0)
    with pytest.raises(RunFailed, match="execute-humaneval-shard-000: SandboxUnavailable"):
        evaluate(config)
    tasks, arts = flow_run_tasks("reference-humaneval")
    run_id = config.run_id
    assert tasks["generate-humaneval-shard-000"].state.type.value == "COMPLETED"
    ex = tasks["execute-humaneval-shard-000"]
    assert ex.state.type.value == "FAILED" and ex.run_count == 2  # the run and one retry
    assert len(arts["execute-humaneval-shard-000"]) == 2  # one per attempt, versions of one key
    artifact = max(arts["execute-humaneval-shard-000"], key=lambda a: a.created)
    assert artifact.key == f"failures-execute-humaneval-shard-000-{run_id}".lower()
    assert "infrastructure error (retried)" in artifact.data and "Input: `" in artifact.data
    record = json.loads((tmp_path / "run" / "humaneval" / "errors" / "execute-shard-00000.json").read_text())
    assert record["retried"] and record["samples"] == [["HumanEval/0", 0], ["HumanEval/1", 0]]


def test_failing_samples_are_listed_with_their_parquet_file(prefect_api, data_dir, tmp_path, capsys):
    """Programs that fail their tests: the shard completes, its artifact lists the samples."""
    saved = tmp_path / "gens.jsonl"
    saved.write_text("".join(json.dumps({"task_id": f"HumanEval/{i}", "completion": c}) + "\n" for i, c in
                             enumerate(["\n    pass\n", "\n    raise RuntimeError('boom')\n", "\n    return 1/0\n"])))
    out = tmp_path / "run"
    assert main(["run", "--load_generations_path", str(saved), "--tasks", "humaneval", "--limit", "3",
                 "--allow_code_execution", "--executor", "local", "--data-dir", str(data_dir),
                 "--output-dir", str(out)]) == 0
    tasks, arts = flow_run_tasks("replay-humaneval")
    (artifact,) = arts["execute-humaneval-shard-000"]
    assert artifact.key.startswith("failures-execute-humaneval-shard-000-replay-")
    parquet = out / "humaneval" / "executions" / "shard-00000.parquet"
    assert f"Parquet: `{parquet}`" in artifact.data
    assert "| HumanEval/1 | 0 | failed | " in artifact.data and "RuntimeError: boom" in artifact.data
    assert "ZeroDivisionError" in artifact.data
    report = inspect_output(capsys, out)
    assert "3 failing samples in the shards written, scored" in report and "#" + artifact.data in report


def test_a_shards_artifact_links_each_failing_sample_into_the_runs_view(prefect_api, data_dir, tmp_path, monkeypatch):
    """With the storage root served over HTTP (docs/viewer.md's command) and CODEEVAL_VIEW_URL naming
    it, the execution shard's artifact links every failing sample to its page in the run's view,
    which the run wrote as it ended; each link opens that sample in headless Chromium."""
    from team_server import CHROMIUM, free_port, with_page
    from view_data import settle, storage_served

    if CHROMIUM is None:
        pytest.skip("Debian's chromium package is not installed (make chromium)")
    port, storage = free_port(), tmp_path / "storage"
    monkeypatch.setenv("CODEEVAL_STORAGE", str(storage))
    monkeypatch.setenv("CODEEVAL_VIEW_URL", f"http://127.0.0.1:{port}")
    saved = tmp_path / "gens.jsonl"
    saved.write_text("".join(json.dumps({"task_id": f"HumanEval/{i}", "completion": c}) + "\n" for i, c in
                             enumerate(["\n    return []\n", "\n    raise RuntimeError('boom')\n"])))
    assert main(["run", "--load_generations_path", str(saved), "--tasks", "humaneval", "--limit", "2", "--model",
                 "linked", "--allow_code_execution", "--executor", "local", "--data-dir", str(data_dir)]) == 0
    _, arts = flow_run_tasks("linked-humaneval")
    (artifact,) = arts["execute-humaneval-shard-000"]
    (run_dir,) = storage.iterdir()
    site = f"http://127.0.0.1:{port}/{run_dir.name}/view"
    assert f"[the run's view]({site}/index.html#task=humaneval&verdict=failed)" in artifact.data
    links = re.findall(r"\| \[(HumanEval/\d)\]\((http[^)]+)\) \| (\d) \|", artifact.data)
    assert [(t, s) for t, _, s in links] == [("HumanEval/0", "0"), ("HumanEval/1", "0")], artifact.data

    async def drive(page):
        seen = []
        for _, url, _ in links:
            await page.call("Page.navigate", url="about:blank")
            await page.call("Page.navigate", url=url)
            await settle(page, "document.querySelector('dl.facts') !== null")
            seen.append(await page.evaluate("document.querySelector('main h2').textContent"))
        await page.screenshot("view-from-a-shard-artifact.png")
        return seen, await page.evaluate("document.querySelector('header h1').textContent")

    with storage_served(storage, port, f"{run_dir.name}/view/index.html"):
        seen, title = with_page(tmp_path, "chromium", drive)
    assert seen == ["humaneval · HumanEval/0 · sample 0", "humaneval · HumanEval/1 · sample 0"]
    # the view the run wrote as it ended (before its run.json) names the model and the run
    assert title == f"codeeval view: linked (run {run_dir.name})"


def test_inspect_of_a_missing_run_is_one_line(tmp_path, capsys):
    assert main(["inspect", str(tmp_path / "nothing")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("codeeval: error: no run at ") and err.count("\n") == 1
