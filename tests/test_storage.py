"""Stage artifacts through an fsspec store (CODEEVAL_STORAGE=file://...): each host's mirror,
paths rebased between hosts, files put in the store after their atomic write and fetched when
missing; and a whole run through the CLI whose results land in the store."""
from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

from codeeval.core import artifacts, storage
from codeeval.core.results import RunResults
from codeeval.pipeline.config import RunConfig


def test_two_hosts_share_artifacts_through_the_store(tmp_path, monkeypatch):
    store = tmp_path / "store"
    monkeypatch.setenv("CODEEVAL_STORAGE", store.as_uri())
    monkeypatch.setenv("CODEEVAL_CACHE", str(tmp_path / "host-a"))
    run_dir = RunConfig(model="reference", tasks=["humaneval"]).run_dir
    assert run_dir.is_relative_to(tmp_path / "host-a")
    shard = artifacts.RunLayout(run_dir).generations("humaneval", 0)
    rows = [{"task_id": "HumanEval/0", "sample": 0, "raw": "r", "completion": "c", "n_tokens": 1,
             "finish_reason": "stop", "thinking": None, "thinking_tokens": None}]
    artifacts.write_table(shard, rows, artifacts.GENERATIONS_SCHEMA, key="k1")
    in_store = list(store.rglob("shard-00000.parquet"))
    assert len(in_store) == 1 and in_store[0].read_bytes() == shard.read_bytes()

    monkeypatch.setenv("CODEEVAL_CACHE", str(tmp_path / "host-b"))  # another host, its own mirror
    there = Path(storage.localize(str(shard)))
    assert there != shard and there.is_relative_to(tmp_path / "host-b") and not there.exists()
    assert artifacts.written_with(there, "k1") and not artifacts.written_with(there, "k2")
    assert artifacts.read_rows(there) == rows
    assert storage.localize("/elsewhere/x.parquet") == "/elsewhere/x.parquet"  # not a mirror path


def test_without_a_url_nothing_is_copied(tmp_path, monkeypatch):
    monkeypatch.setenv("CODEEVAL_STORAGE", str(tmp_path / "shared"))
    assert storage.url() is None
    assert RunConfig(model="reference", tasks=["humaneval"]).run_dir.parent == tmp_path / "shared"
    path = artifacts.write_json(tmp_path / "x.json", {"a": 1})
    assert storage.fetch(path) == path and storage.localize(str(path)) == str(path)


def test_a_run_writes_its_results_to_the_store(tmp_path, data_dir, prefect_api, monkeypatch):
    """And the leaderboard's copies of it, as two nights on two hosts keep them: both copies reach the
    store, the second host compares with the first night's copy from the store, and its pruning of
    that copy reaches the store too."""
    store, elsewhere = tmp_path / "store", tmp_path / "elsewhere"
    env = {**__import__("os").environ, "CODEEVAL_STORAGE": store.as_uri(), "CODEEVAL_CACHE": str(tmp_path / "cache")}
    done = subprocess.run([sys.executable, "-m", "codeeval", "run", "--model", "reference", "--tasks", "humaneval",
                           "--limit", "3", "--shard_size", "2", "--executor", "local", "--allow_code_execution",
                           "--data-dir", str(data_dir), "--save_generations", "--save_generations_path",
                           f"{elsewhere.as_uri()}/out/gens.json", "--metric_output_path",
                           f"{elsewhere.as_uri()}/out/m.json"], capture_output=True, text=True, env=env, timeout=600,
                          cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    (results,) = store.rglob("results.json")
    assert json.loads(results.read_text())["humaneval"] == {"pass@1": 1.0}
    # outputs named by URL: written there, as given, and named so by results.json
    assert (elsewhere / "out" / "m.json").read_bytes() == results.read_bytes()
    assert len(json.loads((elsewhere / "out" / "gens_humaneval.json").read_text())) == 3
    saved = json.loads(results.read_text())["codeeval"]["tasks"]["humaneval"]["saved_generations"]
    assert saved == f"{elsewhere.as_uri()}/out/gens_humaneval.json"
    stored = {p.relative_to(results.parent).as_posix() for p in results.parent.rglob("*.parquet")}
    assert stored == {"humaneval/problems.parquet", "humaneval/generations/shard-00000.parquet",
                      "humaneval/generations/shard-00001.parquet", "humaneval/executions/shard-00000.parquet",
                      "humaneval/executions/shard-00001.parquet"}

    from codeeval.reporting import nightly, paired

    monkeypatch.setenv("CODEEVAL_STORAGE", store.as_uri())
    run = RunResults.from_json(json.loads(results.read_text()))
    nights = []
    for host, night in (("cache", "2026-11-24T020000Z"), ("host-b", "2026-11-25T020000Z")):
        monkeypatch.setenv("CODEEVAL_CACHE", str(tmp_path / host))
        board = storage.shared(nightly.BOARD)
        here = dataclasses.replace(run, run_dir=storage.localize(run.run_dir))  # the run as this host sees it
        if nights:  # "since" names the first host's night, read from the store
            assert nightly.previous_night(nightly.read_history(board), nights[0]) == "2026-11-24 02:00 UTC"
        nights.append(nightly.rows_of(here, night[:10], paired.keep_samples(board, night, here)))
        nightly.write_leaderboard(nightly.history_path(board, night), nights[-1])
    copies = store / "leaderboard" / "samples"

    def copy(night: str) -> list[str]:
        folder = copies / night / run.run_id
        return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())

    assert copy("2026-11-24T020000Z") == copy("2026-11-25T020000Z") == sorted(
        ["results.json", "run.json", "humaneval/metrics.json", *stored])
    first = board / nights[0][0].samples
    assert not first.exists()  # host-b holds only its own night
    (compared,) = [p for p in paired.compare_nights(board, nights[1], nights[0], {}) if p.against == paired.PREVIOUS]
    assert compared.result is not None and compared.result.a == compared.result.b == 1.0, compared.why
    assert paired.prune(board, [nights[1]]) == [first]
    assert [p.name for p in copies.iterdir()] == ["2026-11-25T020000Z"]
