"""Repository environments that build for any project (issue 22), through the CLI, real Docker
and a real Prefect API, on a small tree of their own (tests/repo_fixtures.write_env_tree):
an sdist-only requirement (`rwlock`) is built into a wheel in the sandbox, stdlib backports
(`typing`, `enum34`, `futures`) are never installed over the interpreter's modules, a requirement no index
has makes its project `env_error` with one line naming it; the tree is byte-identical after."""
from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from docker_env import ensure_images
from repo_fixtures import write_data, write_env_tree

from codeeval.cli import main

MISSING = "codeeval-no-such-distribution-zz"


def tree_state(root: Path) -> dict[str, str]:
    """Every path under root (folders too) -> its bytes' sha256 ('dir' for a folder)."""
    state = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            state[str(path.relative_to(root))] = "dir" if path.is_dir() else hashlib.sha256(path.read_bytes()).hexdigest()
    return state


@pytest.fixture()
def env_tree(tmp_path):
    source = tmp_path / "Source_Code"
    write_data(tmp_path / "data", "deveval", write_env_tree(source))
    return tmp_path / "data", source


def test_hard_environments_through_the_flow(prefect_api, env_tree, tmp_path, capsys, codeeval_cache):
    ensure_images()
    data, source = env_tree
    before = tree_state(source)
    out = tmp_path / "run"
    assert main(["run", "--model", "reference", "--tasks", "deveval", "--allow_code_execution", "--data-dir", str(data),
                 "--source-code-root", str(source), "--output-dir", str(out)]) == 0
    capsys.readouterr()
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import LogFilter
    from prefect.client.schemas.sorting import LogSort

    said = []
    for _ in range(20):  # the run's log as the Prefect UI shows it (shipped to the API in batches)
        with get_client(sync_client=True) as client:
            said = [log.message for log in client.read_logs(LogFilter(), limit=200, sort=LogSort.TIMESTAMP_DESC)
                    if MISSING in log.message]
        if said:
            break
        time.sleep(0.5)
    assert len(said) == 1 and "env_error" in said[0] and "no wheel or sdist" in said[0], said
    rows = {r["task_id"]: r for p in sorted((out / "deveval" / "executions").glob("*.parquet"))
            for r in pq.read_table(p).to_pylist()}
    # sdist-only: rwlock's wheel was built (in the sandbox) and the oracle imports it
    assert rows["envy.core.make_lock"]["status"] == "passed", rows["envy.core.make_lock"]
    # backports: the tests see the interpreter's own typing and enum, and the env holds neither
    assert rows["envy.core.make_lock#stdlib"]["status"] == "passed", rows["envy.core.make_lock#stdlib"]
    sites = [s for s in codeeval_cache.glob("repo-envs/*/lib/python3.*/site-packages") if (s / "rwlock").exists()]
    assert sites and all(not (s / name).exists() for s in sites for name in ("typing.py", "enum", "concurrent"))
    complete = [json.loads((s.parents[2] / ".complete").read_text()) for s in sites]
    assert all(set(c["not_installed_stdlib_backports"]) == {"typing", "futures==3.4.0"} for c in complete), complete
    # a requirement no index has: env_error naming it, never a model failure
    lost = rows["lost.one"]
    assert lost["status"] == "env_error" and MISSING in lost["detail"] and "\n" not in lost["detail"], lost
    results = json.loads((out / "results.json").read_text())["deveval"]
    assert (results["env_error"], results["pass@1"]) == (1, 1.0)
    # nothing written in the user's tree, the journal included
    assert tree_state(source) == before


def test_repo_envs_report(env_tree, capsys):
    ensure_images()
    data, source = env_tree
    before = tree_state(source)
    assert main(["repo-envs", "--data-dir", str(data), "--source-code-root", str(source)]) == 0
    lines = capsys.readouterr().out.splitlines()
    envy = next(ln for ln in lines if ln.startswith("Utilities/envy "))
    lost = next(ln for ln in lines if ln.startswith("Utilities/lost "))
    assert " built " in envy and " 2/2 " in envy, lines
    assert MISSING in lost and " -/1 " in lost, lines
    assert lines[-1].startswith("1/2 environments built; oracle 2/2"), lines
    assert tree_state(source) == before


def test_a_legacy_journal_in_the_tree_is_replayed_and_removed(tmp_path):
    """An earlier version kept its journal (and lock files) in the tree: a file a killed run of it
    left patched is restored, and the tree is as it was before that run."""
    from repo_fixtures import write_mini_tree

    from codeeval.executors.repo.jobs import recover_project
    from codeeval.executors.repo.patch import LEGACY_DIR

    root = tmp_path / "Source_Code"
    write_mini_tree(root)
    before = tree_state(root)
    rel = "Utilities/mini/mini/util.py"
    path = root / rel
    legacy = root / LEGACY_DIR / "Utilities__mini"
    legacy.mkdir(parents=True)
    (legacy / "e.orig").write_bytes(path.read_bytes())
    (legacy / "e.json").write_text(json.dumps({"file": rel, "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
                                               "mode": 0o644, "mtime_ns": path.stat().st_mtime_ns, "pid": 1}))
    (legacy / "lock").write_text("")
    path.write_text("patched by a killed run\n")
    assert recover_project(root, "Utilities/mini") == [rel]
    assert tree_state(root) == before
