"""The nightly leaderboard flow on a real Prefect API, twice (the second night recomputes nothing
and has no changes), and its HTML page opened in headless Chromium (Debian's package)."""
from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from codeeval.errors import UsageError

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def latest_artifact(key: str):
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey

    with get_client(sync_client=True) as client:
        found = client.read_latest_artifacts(artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=[key])))
    assert found, f"no artifact {key}"
    return found[0]


@pytest.fixture(scope="module")
def nights(prefect_api, data_dir, tmp_path_factory):
    """Two models (the reference solutions; saved generations that fail some problems) on two
    tasks, two nights in a row."""
    from codeeval.flows.nightly import nightly_leaderboard

    tmp = tmp_path_factory.mktemp("nightly")
    saved = tmp / "weak.jsonl"
    saved.write_text("".join(json.dumps({"task_id": f"HumanEval/{i}", "completion": "\n    return None\n"}) + "\n"
                             for i in range(4)))
    models = tmp / "models.yaml"
    models.write_text(f"""
defaults:
  data_dir: {data_dir}
  allow_code_execution: true
  executor: local
  limit: 4
  shard_size: 2
models:
  - model: reference
    tasks: [humaneval, mbpp]
  - model: weak-model
    backend: replay
    load_generations_path: {saved}
    tasks: [humaneval]
    generation: {{n_samples: 1, temperature: 0.0}}
""")
    args = dict(models_file=str(models), output_dir=str(tmp / "board"), runs_dir=str(tmp / "runs"))
    first = nightly_leaderboard(**args)
    first_changes = latest_artifact("leaderboard-changes").data
    second = nightly_leaderboard(**args)
    return tmp, first, first_changes, second


def test_the_first_night_writes_the_leaderboard(nights):
    tmp, first, first_changes, _ = nights
    rows = pq.read_table(tmp / "board" / "leaderboard.parquet").to_pylist()
    primary = {(r["model"], r["task"]): r["value"] for r in rows if r["primary"]}
    assert primary == {("reference", "humaneval"): 1.0, ("reference", "mbpp"): 1.0, ("weak-model", "humaneval"): 0.0}
    assert {r["metric"] for r in rows} == {"pass@1"} and {r["problems"] for r in rows} == {4}
    assert all(r["run_id"] and re.fullmatch(r"\d{4}-\d\d-\d\d", r["date"]) for r in rows)
    assert first["reused"]["reference"]["humaneval"] == {"generate": [0, 2], "execute": [0, 2]}
    assert "3 changes (no previous leaderboard)" in first_changes
    assert "| weak-model | humaneval | pass@1 | - | 0.0000 | new |" in first_changes


def test_the_second_night_recomputes_nothing_and_has_no_changes(nights):
    tmp, first, _, second = nights
    assert second["changes"] == []
    for model, tasks in second["reused"].items():
        for task, counts in tasks.items():
            assert counts["generate"][0] == counts["generate"][1] and counts["execute"][0] == counts["execute"][1], \
                (model, task, counts)
    assert "0 changes since" in latest_artifact("leaderboard-changes").data
    assert "No metric changed." in latest_artifact("leaderboard-changes").data
    table = latest_artifact("leaderboard")
    assert table.type == "table"
    cells = json.loads(table.data) if isinstance(table.data, str) else table.data
    assert {(c["model"], c["task"]) for c in cells} == {("reference", "humaneval"), ("reference", "mbpp"),
                                                         ("weak-model", "humaneval")}
    assert len(list((tmp / "board" / "history").glob("leaderboard-*.parquet"))) == 1


def test_a_malformed_models_file_is_one_line(tmp_path):
    from codeeval.nightly import load_models

    path = tmp_path / "models.yaml"
    path.write_text("models:\n  - model: reference\n    tasks: [humaneval]\n    temperature: 0.1\n")
    with pytest.raises(UsageError, match=r"models\[0\]: unknown key\(s\) temperature$"):
        load_models(path)
    with pytest.raises(UsageError, match="models file not found"):
        load_models(tmp_path / "missing.yaml")


def chromium(*args: str, cwd: Path) -> str:
    done = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                           f"--user-data-dir={cwd / 'chromium-profile'}", "--virtual-time-budget=3000", *args],
                          capture_output=True, text=True, timeout=120, cwd=cwd)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium package is not installed (apt-get install chromium)")
def test_the_leaderboard_page_in_headless_chromium(nights, tmp_path):
    """The page as a browser renders it (its script ran): rows, a chart per task, sorting; a
    screenshot kept beside the test's files."""
    board = nights[0] / "board" / "index.html"
    shot = tmp_path / "leaderboard.png"
    chromium(f"--screenshot={shot}", "--window-size=1100,900", board.as_uri(), cwd=tmp_path)
    assert shot.stat().st_size > 10_000 and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    shutil.copy(shot, nights[0] / "leaderboard.png")  # kept with the module's run for a look

    dom = chromium("--dump-dom", board.as_uri() + "#sort=1-asc", cwd=tmp_path)
    body = dom[dom.index("<tbody>"):dom.index("</tbody>")]
    models = re.findall(r"<tr><td>([^<]+)</td>", body)
    assert models == ["weak-model", "reference"]  # sorted by humaneval pass@1, ascending, by the page's script
    assert 'data-order="asc"' in dom
    charts = re.findall(r'<div class="chart" data-task="([^"]+)">', dom)
    assert charts == ["humaneval", "mbpp"]
    bars = re.findall(r'<rect class="bar" data-model="([^"]+)" data-value="([^"]+)"', dom)
    assert bars == [("reference", "1"), ("weak-model", "0"), ("reference", "1")]
    dom = chromium("--dump-dom", board.as_uri() + "#sort=1-desc", cwd=tmp_path)
    assert re.findall(r"<tr><td>([^<]+)</td>", dom[dom.index("<tbody>"):]) == ["reference", "weak-model"]


def codeeval(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    import sys

    return subprocess.run([sys.executable, "-m", "codeeval", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=600)


def test_the_nightly_command_runs_the_flow_on_this_machine(prefect_api, data_dir, tmp_path):
    """`codeeval nightly models.yaml`: the laptop form of the scheduled deployment; the second
    night prints no changes; a malformed file is one line, exit 2, before any API starts."""
    models = tmp_path / "models.yaml"
    models.write_text(f"defaults: {{data_dir: {data_dir}, allow_code_execution: true, executor: local, limit: 2}}\n"
                      "models:\n  - model: reference\n    tasks: [humaneval]\n")
    first = codeeval("nightly", str(models), "--output-dir", "board", cwd=tmp_path)
    assert first.returncode == 0, first.stderr[-2000:]
    assert "leaderboard: 1 rows, 1 changes since the previous night" in first.stdout
    rows = pq.read_table(tmp_path / "board" / "leaderboard.parquet").to_pylist()
    assert [(r["model"], r["task"], r["value"]) for r in rows] == [("reference", "humaneval", 1.0)]
    second = codeeval("nightly", str(models), "--output-dir", "board", cwd=tmp_path)
    assert second.returncode == 0 and "1 rows, 0 changes" in second.stdout, second.stderr[-2000:]

    models.write_text("models:\n  - model: reference\n    tasks: [no-such-task]\n")
    bad = codeeval("nightly", str(models), cwd=tmp_path)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "no-such-task" in bad.stderr, bad.stderr
