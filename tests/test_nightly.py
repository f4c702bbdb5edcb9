"""The nightly leaderboard flow on a real Prefect API, three nights (the second recomputes nothing
and has no changes; on the third a model's replayed file changes in place, so that some problems
flip each way, and a model fails to load), and its HTML page opened in headless Chromium (Debian's
package), its screenshot kept in .cache/screenshots: intervals, problem counts, error bars, the
flipped problems, the paired comparisons with their links to the samples' Parquet files and to
their pages in each night's view, every link of the page leading to a file that exists, and the
confusion matrices of a model's classification tasks (the oracle on the test fixtures)."""
from __future__ import annotations

import gzip
import html
import json
import os
import re
import shutil
import subprocess
import time
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from page_links import assert_links_resolve

from codeeval.core.errors import RunFailed, UsageError
from codeeval.reporting.view import links

REPO = Path(__file__).resolve().parents[1]
CLASSIFICATION = REPO / "tests" / "fixtures" / "classification"  # the classification tasks' small data sets
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
WINDOW = (1400, 4000)  # the page's screenshot: width, height (the failed model's cause wraps with its path's length)


def latest_artifact(key: str):
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey

    with get_client(sync_client=True) as client:
        found = client.read_latest_artifacts(artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=[key])))
    assert found, f"no artifact {key}"
    return found[0]


MODELS = """
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
  - model: oracle-subset
    backend: reference
    limit: 2
    tasks: [humaneval]
  - model: classifier-oracle
    backend: reference
    data_dir: {classification}
    limit: null
    tasks: [codecomplex, codeclone]
"""
BROKEN = """  - model: {broken}
    tasks: [humaneval]
"""
# the root cause of a model whose config names no architecture: its reason is past the first line
CAUSE = "ValueError: Couldn't instantiate the backend tokenizer from one of: (1) a `tokenizers` library"


def flow_run_names() -> list[str]:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowFilter, FlowFilterName

    with get_client(sync_client=True) as client:
        runs = client.read_flow_runs(flow_filter=FlowFilter(name=FlowFilterName(any_=["nightly-leaderboard"])))
    return [r.name for r in runs]


def night_links() -> list[tuple[str, str | None]]:
    """Every night's task runs: each one's name and the name of the flow run it links to (its model's)."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import (FlowFilter, FlowFilterName, FlowRunFilter, FlowRunFilterParentTaskRunId,
                                                TaskRunFilter, TaskRunFilterFlowRunId)

    with get_client(sync_client=True) as client:
        nights = client.read_flow_runs(flow_filter=FlowFilter(name=FlowFilterName(any_=["nightly-leaderboard"])))
        links = client.read_task_runs(task_run_filter=TaskRunFilter(
            flow_run_id=TaskRunFilterFlowRunId(any_=[n.id for n in nights])))
        runs = client.read_flow_runs(flow_run_filter=FlowRunFilter(
            parent_task_run_id=FlowRunFilterParentTaskRunId(any_=[t.id for t in links])))
    named = {r.parent_task_run_id: r.name for r in runs}
    return [(t.name, named.get(t.id)) for t in links]


def replayed(path: Path, solutions: list[str], right: set[int]) -> None:
    """Saved generations of HumanEval/0..3: the canonical solution where `right`, else `return None`."""
    path.write_text("".join(json.dumps({"task_id": f"HumanEval/{i}", "completion": solutions[i] if i in right else
                                        "\n    return None\n"}) + "\n" for i in range(4)))


@pytest.fixture(scope="module")
def nights(prefect_api, data_dir, tmp_path_factory):
    """Four models (the reference solutions on two tasks; saved generations right on HumanEval/3
    only; the reference solutions on 2 problems instead of 4; the gold labels on two classification
    tasks' fixtures, whole), two nights in a row; on the third
    night the weak model's file, at the same path (the same run directory, its shards rewritten),
    is right on HumanEval/0 and /1 only, and a model that fails to load joins."""
    from codeeval.flows.nightly import nightly_leaderboard

    tmp = tmp_path_factory.mktemp("nightly")
    with gzip.open(data_dir / "humaneval" / "HumanEval.jsonl.gz", "rt") as fh:
        solutions = [json.loads(line)["canonical_solution"] for line in fh][:4]
    saved = tmp / "weak.jsonl"
    replayed(saved, solutions, {3})
    models = tmp / "models.yaml"
    models.write_text(MODELS.format(data_dir=data_dir, saved=saved, classification=CLASSIFICATION))
    args = dict(models_file=str(models), output_dir=str(tmp / "board"), runs_dir=str(tmp / "runs"))
    first = nightly_leaderboard(**args)
    first_changes = latest_artifact("leaderboard-changes").data
    second = nightly_leaderboard(**args)

    replayed(saved, solutions, {0, 1})  # HumanEval/0, /1 fail -> pass; HumanEval/3 pass -> fail
    broken = tmp / "broken-model"
    broken.mkdir()
    (broken / "config.json").write_text(json.dumps({"model_type": "no-such-architecture"}))
    models.write_text(MODELS.format(data_dir=data_dir, saved=saved, classification=CLASSIFICATION)
                      + BROKEN.format(broken=broken))
    with pytest.raises(RunFailed) as third:
        nightly_leaderboard(**args)
    return tmp, first, first_changes, second, str(third.value), latest_artifact("leaderboard-changes").data


def test_the_first_night_writes_the_leaderboard(nights):
    tmp, first, first_changes, *_ = nights
    rows = pq.read_table(sorted((tmp / "board" / "history").glob("*.parquet"))[0]).to_pylist()
    primary = {(r["model"], r["task"]): (r["value"], r["problems"]) for r in rows if r["primary"]}
    assert primary == {("reference", "humaneval"): (1.0, 4), ("reference", "mbpp"): (1.0, 4),
                       ("weak-model", "humaneval"): (0.25, 4), ("oracle-subset", "humaneval"): (1.0, 2),
                       ("classifier-oracle", "codecomplex"): (1.0, 8), ("classifier-oracle", "codeclone"): (1.0, 16)}
    assert {r["metric"] for r in rows if r["model"] != "classifier-oracle"} == {"pass@1"}
    # a classification task's numbers are rows (accuracy the primary one); its matrix is the page's
    assert {(r["task"], r["metric"], r["primary"]) for r in rows if r["model"] == "classifier-oracle"} == {
        (t, m, m == "accuracy") for t in ("codecomplex", "codeclone") for m in ("accuracy", "macro_f1")}
    assert all(r["run_id"] and re.fullmatch(r"\d{4}-\d\d-\d\d", r["date"]) and r["error"] is None for r in rows)
    assert first["reused"]["reference"]["humaneval"] == {"generate": [0, 2], "execute": [0, 2]}
    assert "8 changes (no previous leaderboard)" in first_changes
    assert "| weak-model | humaneval | pass@1 | - | 0.2500 | new |" in first_changes
    assert "flipped" not in first_changes  # no previous night to flip from


def test_the_leaderboard_parquet_carries_each_scores_uncertainty_and_its_samples(nights):
    """stderr, the 95% interval and its method per row, as results.json has them (checked by hand:
    1 of 4 problems passes, sample sd 0.5, SE 0.25); the run directory, the night's copy of the
    run's Parquet files relative to the leaderboard folder, and the night's view of that copy."""
    tmp = nights[0]
    table = pq.read_table(sorted((tmp / "board" / "history").glob("*.parquet"))[0])
    assert {"stderr", "ci95_low", "ci95_high", "stderr_method", "run_dir", "samples", "view"} <= set(
        table.column_names)
    rows = {(r["model"], r["task"]): r for r in table.to_pylist()}
    weak = rows["weak-model", "humaneval"]
    assert weak["stderr"] == pytest.approx(0.25) and weak["stderr_method"] == "closed form over problems"
    assert (weak["ci95_low"], weak["ci95_high"]) == (0.0, pytest.approx(0.25 + 1.959964 * 0.25))
    # the night's copy of the run's results.json (the run directory's own is the third night's by now)
    results = json.loads((tmp / "board" / weak["samples"] / "results.json").read_text())["codeeval"]["tasks"][
        "humaneval"]
    assert [weak["ci95_low"], weak["ci95_high"]] == results["ci95"]["pass@1"] and weak["stderr"] == results["stderr"][
        "pass@1"]
    ref = rows["reference", "humaneval"]
    assert (ref["stderr"], ref["ci95_low"], ref["ci95_high"]) == (0.0, 1.0, 1.0)  # every problem passes
    night = sorted((tmp / "board" / "history").glob("*.parquet"))[0].stem[len("leaderboard-"):]
    for r in rows.values():
        assert r["samples"] == f"samples/{night}/{r['run_id']}", r
        assert (tmp / "board" / r["samples"] / r["task"] / "problems.parquet").is_file()
        assert r["view"] == f"views/{night}/{r['run_id']}", r
        assert (tmp / "board" / r["view"] / "index.html").is_file()


def test_the_second_night_recomputes_nothing_and_has_no_changes(nights):
    tmp, first, _, second, *_ = nights
    assert second["changes"] == []
    assert second["flips"] == {m: {t: {"pass_to_fail": [], "fail_to_pass": []} for t in tasks}
                               for m, tasks in (("reference", ("humaneval", "mbpp")), ("weak-model", ("humaneval",)),
                                                ("oracle-subset", ("humaneval",)),
                                                ("classifier-oracle", ("codecomplex", "codeclone")))}
    for model, tasks in second["reused"].items():
        for task, counts in tasks.items():  # generate and execute; a classification task's train and predict
            assert len(counts) == 2 and all(done == every for done, every in counts.values()), (model, task, counts)


def test_every_night_keeps_its_own_history_file_and_its_own_run_name(nights):
    """Three nights within a minute: three snapshots (none overwritten), three distinct run names;
    each night's copy of the samples under samples/<night>/<run_id>, and its view under views/<night>/<run_id>."""
    tmp = nights[0]
    history = sorted((tmp / "board" / "history").glob("leaderboard-*.parquet"))
    assert len(history) == 3, history
    assert all(re.fullmatch(r"leaderboard-\d{4}-\d\d-\d\dT\d{6}Z(-\d+)?\.parquet", p.name) for p in history)
    # 4 pass@1 rows and the classification tasks' accuracy and macro_f1; the third: the failed model's empty row
    assert [len(pq.read_table(p)) for p in history] == [8, 8, 9]
    copies = sorted(p.relative_to(tmp / "board" / "samples").parts[0] for p in (tmp / "board" / "samples").glob("*/*"))
    assert copies == sorted(p.stem[len("leaderboard-"):] for p in history for _ in range(4))
    views = (tmp / "board" / "views").glob("*/*/index.html")
    assert sorted(p.relative_to(tmp / "board" / "views").parts[0] for p in views) == copies
    names = flow_run_names()
    assert len(names) == len(set(names)) >= 3, names
    assert all(re.fullmatch(r"nightly-models-\d{4}-\d\d-\d\dT\d{6}Z-[0-9a-f]{8}", n) for n in names), names
    # each model's task run in a night's run graph is named as its evaluate run (the model's), not `evaluate-0`
    links = night_links()
    assert links and all(link == run for link, run in links), links
    assert {re.sub(r"-[0-9a-f]{6}$", "", link) for link, _ in links} == {
        "reference-humaneval-mbpp", "weak-model-humaneval", "oracle-subset-humaneval", "broken-model-humaneval",
        "classifier-oracle-codecomplex-codeclone"}, links


def test_a_failed_model_is_on_the_leaderboard_with_its_whole_root_cause(nights):
    """The flow's message, the changes, the table artifact and the parquet carry the failed model and
    the cause past its first line (the tokenizer's reason and the warning naming the model type)."""
    tmp, *_, message, changes = nights
    broken = str(tmp / "broken-model")
    for text in (message, changes):
        flat = " ".join(text.split())
        assert f"{broken}" in flat and CAUSE in flat, text
        assert "sentencepiece or tiktoken installed" in flat and "no-such-architecture" in flat, text
    assert message.startswith(f"1 of 5 models failed: {broken}; tonight's scores:\n")
    # the night's log ends with it (--watch): every model's scores, or its cause
    assert re.search(r"^weak-model\n  humaneval +pass@1 = 0\.5000 ± 0\.\d{4} \(4 problems\)$", message, re.M), message
    assert re.search(f"^{re.escape(broken)}: failed\n  \\d+ shards failed \\(", message, re.M), message
    assert "| weak-model | humaneval | pass@1 | 0.2500 | 0.5000 | +0.2500 |" in changes
    cells = latest_artifact("leaderboard").data
    cells = json.loads(cells) if isinstance(cells, str) else cells
    (row,) = [c for c in cells if c["model"] == broken]
    assert row["value"] is None and CAUSE in row["error"]
    rows = pq.read_table(tmp / "board" / "leaderboard.parquet").to_pylist()
    assert {(r["model"], r["task"], r["value"]) for r in rows if r["primary"]} == {
        ("reference", "humaneval", 1.0), ("reference", "mbpp", 1.0), ("weak-model", "humaneval", 0.5),
        ("oracle-subset", "humaneval", 1.0), (broken, "humaneval", None), ("classifier-oracle", "codecomplex", 1.0),
        ("classifier-oracle", "codeclone", 1.0)}


def test_the_changes_list_the_problems_that_flipped_since_the_previous_night(nights):
    """The weak model's file changed in place: its run directory's shards were rewritten, and the
    previous night's copy (samples/) still holds what it was; HumanEval/3 went pass -> fail, /0 and
    /1 fail -> pass, as the Parquet rows of both nights say."""
    tmp, *_, changes = nights
    # since the previous night's UTC time, not its date alone: two nights may share a date (these three do)
    assert re.search(r"## Problems that flipped since \d{4}-\d\d-\d\d \d\d:\d\d UTC\n", changes), changes
    assert "| weak-model | humaneval | HumanEval/3 | HumanEval/0, HumanEval/1 |" in changes
    assert "| reference | humaneval | none | none |" in changes and "| reference | mbpp | none | none |" in changes
    history = [pq.read_table(p).to_pylist() for p in sorted((tmp / "board" / "history").glob("*.parquet"))]
    (before,), (after,) = ([r for r in rows if r["model"] == "weak-model"] for rows in history[1:])
    assert before["run_dir"] == after["run_dir"] and before["samples"] != after["samples"]

    def passed(rel: str) -> dict:
        shards = sorted((tmp / "board" / rel / "humaneval" / "executions").glob("*.parquet"))
        return {r["task_id"]: r["passed"] for path in shards for r in pq.read_table(path).to_pylist()}
    assert passed(before["samples"]) == {"HumanEval/0": False, "HumanEval/1": False, "HumanEval/2": False,
                                         "HumanEval/3": True}
    assert passed(after["samples"]) == {"HumanEval/0": True, "HumanEval/1": True, "HumanEval/2": False,
                                        "HumanEval/3": False}


def test_a_malformed_models_file_is_one_line(tmp_path):
    from codeeval.reporting.nightly import load_models

    path = tmp_path / "models.yaml"
    path.write_text("models:\n  - model: reference\n    tasks: [humaneval]\n    temperature: 0.1\n")
    with pytest.raises(UsageError, match=r"models\[0\]: unknown key\(s\) temperature$"):
        load_models(path)
    with pytest.raises(UsageError, match="models file not found"):
        load_models(tmp_path / "missing.yaml")


def test_a_bad_backend_option_fails_the_nightly_before_its_first_model_runs(data_dir, tmp_path):
    """The second model's misspelled option (models.yaml's values are YAML scalars): one line, exit 2,
    before the API boots or the first model (a good one) runs anything."""
    models = tmp_path / "models.yaml"
    models.write_text(f"defaults: {{data_dir: {data_dir}, allow_code_execution: true, executor: local, limit: 1}}\n"
                      "models:\n  - model: reference\n    tasks: [humaneval]\n"
                      "  - model: gpt-x\n    backend: openai\n    tasks: [humaneval]\n"
                      "    backend_options: {concurrency: 4, max_retry: 2}\n")
    started = time.monotonic()
    bad = codeeval("nightly", str(models), "--output-dir", "board", cwd=tmp_path)
    from codeeval.generation import options

    assert bad.returncode == 2 and bad.stderr.splitlines() == [
        "codeeval: error: --backend_option max_retry: not an option of the openai backend (did you mean "
        f"max_retries?); its options: {', '.join(options.declared('openai'))}"], bad.stderr
    assert "max_retries, timeout_s" in bad.stderr
    assert time.monotonic() - started < 60 and sorted(p.name for p in tmp_path.iterdir()) == ["models.yaml"]


def chromium(*args: str, cwd: Path) -> str:
    done = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                           f"--user-data-dir={cwd / 'chromium-profile'}", "--virtual-time-budget=3000", *args],
                          capture_output=True, text=True, timeout=120, cwd=cwd)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium package is not installed (make chromium)")
def test_the_leaderboard_page_in_headless_chromium(nights, tmp_path):
    """The page after the third night as a browser renders it (its script ran): the failed model
    with its whole cause, every score with its 95% interval and problem count, the changes and the
    flipped problems as HTML tables, a trend over the three nights per task, bars with error bars,
    the paired comparisons (the one refused for another problem set says why), the confusion
    matrices of the classification tasks, sorting; every link opens a file that exists (each score
    its task in tonight's view of its run, each flipped problem its sample in both nights' views);
    its screenshot kept (.cache/screenshots/leaderboard.png), the matrices inside it."""
    from team_server import keep_screenshot

    board = nights[0] / "board" / "index.html"
    broken = str(nights[0] / "broken-model")
    shot = tmp_path / "leaderboard.png"
    chromium(f"--screenshot={shot}", f"--window-size={WINDOW[0]},{WINDOW[1]}", board.as_uri(), cwd=tmp_path)
    assert shot.stat().st_size > 10_000 and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    keep_screenshot(shot)

    dom = chromium("--dump-dom", board.as_uri() + "#sort=1-asc", cwd=tmp_path)
    body = dom[dom.index("<tbody>"):dom.index("</tbody>")]
    # sorted by humaneval pass@1, ascending, by the page's script: the failed model first
    # (a model without a humaneval score, or failed on it, sorts as -1: the two keep their order)
    assert model_names(body) == ["classifier-oracle", f"{broken} (failed)", "weak-model", "reference",
                                 "oracle-subset"]
    assert 'data-order="asc"' in dom
    hrefs = assert_links_resolve(board, dom)  # every link of the page opens a file beside it
    assert_cells_link_their_views(dom, board.parent, hrefs)
    scores = re.findall(r'<td data-value="([^"]+)" data-problems="(\d+)"[^>]*><a class="view" href="[^"]+">[0-9.]+'
                        r'</a><span class="ci">\[([0-9.]+), ([0-9.]+)\]</span><span class="problems">(\d+) problems'
                        r'</span></td>', body)
    assert sorted(scores) == [("0.5", "4", "0.0000", "1.0000", "4"), ("1", "16", "1.0000", "1.0000", "16"),
                              ("1", "2", "1.0000", "1.0000", "2"), ("1", "4", "1.0000", "1.0000", "4"),
                              ("1", "4", "1.0000", "1.0000", "4"), ("1", "8", "1.0000", "1.0000", "8")]
    assert "standard error 0.2887 (closed form over problems)" in dom  # the weak model's cell's tooltip
    assert '<td class="failed-cell" data-value="-1"' in body

    failures = dom[dom.index('<div class="failures"'):]
    failures = " ".join(html.unescape(failures[:failures.index("</ul>")]).split())
    assert broken in failures and CAUSE in failures and "sentencepiece or tiktoken installed" in failures
    assert "no-such-architecture" in failures

    changes = dom[dom.index('<table id="changes">'):]
    changes = changes[:changes.index("</table>")]
    assert re.search(r"<td>weak-model</td><td>humaneval</td><td>pass@1</td><td>0.2500</td><td>0.5000</td>"
                     r'<td class="up">\+0.2500</td>', changes), changes
    assert "|---|" not in dom and "**" not in dom  # rendered, not markdown
    flips = dom[dom.index('<table id="flips">'):]
    flips = flips[:flips.index("</table>")]
    weak = flips[flips.index('<tr data-model="weak-model"'):]
    weak = weak[:weak.index("</tr>")]
    down, up = weak.split('<td class="up">')
    assert re.findall(r'data-problem="([^"]+)"', down) == ["HumanEval/3"]
    assert re.findall(r'data-problem="([^"]+)"', up) == ["HumanEval/0", "HumanEval/1"]
    assert_links_hold(board.parent, down, "HumanEval/3", before=True, tonight=False)
    assert_links_hold(board.parent, up, "HumanEval/1", before=False, tonight=True)
    reference = flips[flips.index('<tr data-model="reference" data-task="humaneval"'):]
    assert reference[:reference.index("</tr>")].count("<td>none</td>") == 2  # no flips: no colour

    trends = re.findall(r'<div class="chart trend" data-task="([^"]+)" data-nights="(\d+)">', dom)
    assert trends == [("humaneval", "3"), ("mbpp", "3"), ("codecomplex", "3"), ("codeclone", "3")]
    series = dict(re.findall(r'<g class="series" data-model="([^"]+)" data-values="([^"]*)">', dom))
    assert series["weak-model"] == "0.25,0.25,0.5" and series["reference"] == "1,1,1"
    assert series[broken] == ",,"  # no value: no point, no line
    bars = re.findall(r'<rect class="bar" data-model="([^"]+)" data-value="([^"]+)"', dom)
    assert bars == [("reference", "1"), ("weak-model", "0.5"), ("oracle-subset", "1"), ("reference", "1"),
                    ("classifier-oracle", "1"), ("classifier-oracle", "1")]
    errorbars = re.findall(r'<g class="errorbar" data-model="([^"]+)" data-ci="([^"]+)">', dom)
    assert errorbars == [("reference", "1,1"), ("weak-model", "0,1"), ("oracle-subset", "1,1"), ("reference", "1,1"),
                         ("classifier-oracle", "1,1"), ("classifier-oracle", "1,1")]
    assert_confusion_matrices(dom, board.parent)
    boxes = layout(board, ".chart.matrix", tmp_path)  # the screenshot's window holds every matrix whole
    assert {(task, model) for task, model, *_ in boxes} == {("codecomplex", "classifier-oracle"),
                                                            ("codeclone", "classifier-oracle")}
    for task, model, left, top, right, bottom in boxes:
        assert 0 <= left < right <= WINDOW[0] and 0 <= top < bottom <= WINDOW[1], (task, model, top, bottom)

    paired = paired_rows(dom)
    # against its previous night: b = 1 (HumanEval/3), c = 2: p = 2 P(X <= 1), X ~ Bin(3, 1/2) = 1
    assert paired["weak-model", "humaneval", "previous night"] == [
        "humaneval", "previous night: its run of " + nights[1]["date"], "pass@1", "0.2500", "0.5000", "+0.2500",
        "[-0.6883, +1.0000]", "1 McNemar's exact test", "4", "1 / 2"]
    # against the best model: b = 2 (HumanEval/2, /3 pass in the reference, fail here), c = 0: p = 2 / 4
    assert paired["weak-model", "humaneval", "best model"][1:] == [
        "best model: reference", "pass@1", "1.0000", "0.5000", "-0.5000", "[-1.0000, +0.0658]",
        "0.5 McNemar's exact test", "4", "2 / 0"]
    section = dom[dom.index('<section class="paired" data-model="weak-model">'):]
    flipped = re.findall(r'<tr class="flipped">(.*?)</tr>', section[:section.index("</section>")])
    assert [re.findall(r'data-problem="([^"]+)"', row) for row in flipped] == [
        ["HumanEval/3", "HumanEval/0", "HumanEval/1"], ["HumanEval/2", "HumanEval/3"]]
    assert paired["oracle-subset", "humaneval", "best model"] == [
        "humaneval", "best model: reference", "humaneval: the runs hold different problem sets (4 problems in A, "
        "2 in B; 2 only in A (first HumanEval/2)); not comparable"]
    assert paired["reference", "humaneval", "best model"][2] == "the best model on humaneval tonight"
    assert f'<section class="paired" data-model="{html.escape(broken)}"><h3>' in dom
    assert "failed tonight: nothing to compare" in dom
    dom = chromium("--dump-dom", board.as_uri() + "#sort=1-desc", cwd=tmp_path)
    body = dom[dom.index("<tbody>"):dom.index("</tbody>")]
    assert model_names(body) == ["reference", "oracle-subset", "weak-model", "classifier-oracle",
                                 f"{broken} (failed)"]


def model_names(body: str) -> list[str]:
    """The leaderboard's rows in the order shown: each one's first cell as text."""
    return [re.sub(r"<[^>]+>", "", cell) for cell in re.findall(r'<tr(?: class="failed")?><td>(.*?)</td>', body)]


def assert_cells_link_their_views(dom: str, board: Path, hrefs: list[str]) -> None:
    """Each score links to its task in the view its row names (tonight's, of its model's run), each
    model's name to that view's first page; the failed model, new tonight, has no view: no links."""
    table = dom[dom.index('<table class="sortable" id="leaderboard">'):]
    table = table[:table.index("</table>")]
    tasks = [head.split()[0] for head in re.findall(r"<th[^>]*>([^<]*)</th>", table)[1:-1]]
    rows = [r for r in pq.read_table(board / "leaderboard.parquet").to_pylist() if r["primary"]]
    night = sorted((board / "history").glob("*.parquet"))[-1].stem[len("leaderboard-"):]
    view = {r["model"]: r["view"] for r in rows if r["view"]}
    assert set(view.values()) == {f"views/{night}/{r['run_id']}" for r in rows if not r["error"]}
    expected = {(r["model"], r["task"]): r["view"] and links.href(r["view"], task=r["task"]) for r in rows}
    shown = {}
    for tr in re.findall(r"<tr[^>]*>(.*?)</tr>", table[table.index("<tbody>"):], re.S):
        name, *cells = re.findall(r"<td[^>]*>(.*?)</td>", re.sub(r' title="[^"]*"', "", tr))  # a cause holds ">"
        model = html.unescape(re.sub(r"<[^>]+>", "", name)).removesuffix(" (failed)")
        named = re.match(r'<a class="view" href="([^"]+)">', name)
        assert (html.unescape(named.group(1)) if named else None) == (
            links.href(view[model]) if model in view else None), name
        for task, cell in zip(tasks, cells):
            link = re.match(r'<a class="view" href="([^"]+)">', cell)
            if (model, task) in expected or link:
                shown[model, task] = html.unescape(link.group(1)) if link else None
    assert shown == expected and None in shown.values()  # the failed model's cell
    for (model, task), link in shown.items():
        assert link is None or (link.endswith(f"#task={task}") and link in hrefs), (model, task, link)


def gold_counts(board: Path, task: str) -> Counter:
    """Tonight's test records of the oracle's classification task per true class, read from its
    problems (each record's label), not from its scores."""
    from codeeval.benchmarks.classification import SOURCES

    (row,) = [r for r in pq.read_table(board / "leaderboard.parquet").to_pylist()
              if r["model"] == "classifier-oracle" and r["task"] == task and r["primary"]]
    problems = pq.read_table(board / row["samples"] / task / "problems.parquet").to_pylist()
    return Counter(SOURCES[task].label(json.loads(p["record"]), p["task_id"]) for p in problems)


def matrix_cells(chart: str) -> dict:
    """(true class, predicted class) -> (the count the cell shows, its share of its row) of one matrix."""
    cells = re.findall(r'<rect class="cell[^"]*" data-true="([^"]*)" data-predicted="([^"]*)" data-count="(\d+)" '
                       r'data-share="([^"]+)"[^>]*><title>[^<]*</title></rect><text class="count"[^>]*>(\d+)</text>',
                       chart)
    assert all(count == shown for *_, count, _, shown in cells), cells  # the number drawn is the cell's
    return {(html.unescape(t), html.unescape(p)): (int(n), float(share)) for t, p, n, share, _ in cells}


def assert_confusion_matrices(dom: str, board: Path) -> None:
    """After the per-task charts, a matrix per classification task of the model that ran it (none
    for the other tasks, none for the failed model): its title, accuracy, class names on both axes,
    and, the oracle's, each class's test records on the diagonal and 0 elsewhere."""
    from codeeval.benchmarks.classification import BINARY, COMPLEXITIES

    assert dom.index("<h2>Tonight per task</h2>") < dom.index('<h2 id="confusion">Confusion matrices</h2>') < dom.index(
        '<section class="paired"')
    charts = re.findall(r'<div class="chart matrix" data-task="([^"]+)" data-model="([^"]+)">(.*?)</svg></div>',
                        dom, re.S)
    assert [(task, model) for task, model, _ in charts] == [("codecomplex", "classifier-oracle"),
                                                           ("codeclone", "classifier-oracle")]
    for task, model, chart in charts:
        classes = COMPLEXITIES if task == "codecomplex" else BINARY
        gold = gold_counts(board, task)
        records = sum(gold.values())
        assert f"<h3>{task}: {model}</h3>" in chart and f"accuracy 1.0000 ({records} of {records} right)" in chart
        assert re.findall(r'<text class="predicted"[^>]*>([^<]+)</text>', chart) == list(classes)
        assert re.findall(r'<text class="true"[^>]*>([^<]+)</text>', chart) == list(classes)
        assert matrix_cells(chart) == {(t, p): (gold[t] if t == p else 0, float(t == p and gold[t] > 0))
                                       for t in classes for p in classes}
        assert re.findall(r'<text class="total"[^>]*>(\d+)</text>', chart) == [str(gold[c]) for c in classes]
    assert records == 16 and set(gold.values()) == {8}  # codeclone's fixture: 8 clones, 8 not



def layout(page: Path, selector: str, tmp: Path) -> list[list]:
    """[data-task, data-model, left, top, right, bottom] of each element the selector finds, as
    Chromium lays the page out in the screenshot's window (a copy of the page with a probe script)."""
    probe = tmp / "probe.html"
    probe.write_text(page.read_text().replace("</body>", (
        "<script>document.body.dataset.layout = JSON.stringify(Array.from(document.querySelectorAll("
        f"{json.dumps(selector)})).map(e => {{ const r = e.getBoundingClientRect(); return [e.dataset.task, "
        "e.dataset.model, r.left, r.top, r.right, r.bottom]; }));</script></body>")))
    dom = chromium("--dump-dom", f"--window-size={WINDOW[0]},{WINDOW[1]}", probe.as_uri(), cwd=tmp)
    return json.loads(html.unescape(re.search(r'data-layout="([^"]*)"', dom).group(1)))


def test_a_confusion_matrix_is_a_heat_map_of_its_counts():
    """By hand: a 2x2 and a 7x7 matrix drawn with every count, each cell shaded by its share of its
    row (darker for a larger share; green on the diagonal, red off it; grey for a class with no
    records), the class names on both axes and every text escaped; a task with no matrix, or a
    malformed one, draws nothing."""
    from codeeval.benchmarks.classification import COMPLEXITIES
    from codeeval.reporting.matrix import EMPTY, Confusion, confusion_of, confusions_of, heatmap

    two = heatmap("codeclone", "m", Confusion(("false", "true"), ((3, 1), (2, 6)), 0.75))
    assert "<h3>codeclone: m</h3>" in two and "accuracy 0.7500 (9 of 12 right)" in two
    assert matrix_cells(two) == {("false", "false"): (3, 0.75), ("false", "true"): (1, 0.25),
                                 ("true", "false"): (2, 0.25), ("true", "true"): (6, 0.75)}
    fills = dict(re.findall(r'data-true="([^"]+)" data-predicted="[^"]+" data-count="(\d+)"[^>]*fill="([^"]+)"',
                            two)[i][1:] for i in range(4))
    assert fills["3"] == fills["6"] and fills["1"] == fills["2"]  # the same share, the same shade
    def lightness(fill: str) -> int:
        return sum(int(fill[k:k + 2], 16) for k in (1, 3, 5))
    assert lightness(fills["3"]) < lightness(fills["1"])  # 3 of 4 darker than 1 of 4
    assert fills["3"][1:3] < fills["3"][3:5] and fills["1"][1:3] > fills["1"][3:5]  # green right, red wrong

    classes = (*COMPLEXITIES[:-1], '<np> & "co"')
    counts = tuple(tuple((5 if i == j else 1) * (i != 1) for j in range(7)) for i in range(7))  # linear: no records
    seven = heatmap("codecomplex", "<script>alert(1)</script>", Confusion(classes, counts, None))
    assert "<script>" not in seven and "<np>" not in seven and "&lt;script&gt;alert(1)&lt;/script&gt;" in seven
    for axis in ("predicted", "true"):  # across the top, down the side
        assert re.findall(f'<text class="{axis}"[^>]*>([^<]+)</text>', seven)[-1] == "&lt;np&gt; &amp; &quot;co&quot;"
    cells = matrix_cells(seven)
    assert len(cells) == 49 and sum(n for n, _ in cells.values()) == 6 * 11
    for (true, predicted), (count, share) in cells.items():  # each cell its share of its row (of 11, or of 0)
        assert count == counts[classes.index(true)][classes.index(predicted)]
        assert share == pytest.approx(count / 11 if true != "linear" else 0.0, abs=1e-4), (true, predicted)
    assert cells["linear", "linear"] == (0, 0.0) and seven.count(f'fill="{EMPTY}"') == 7  # the empty row
    assert "accuracy 0.4545 (30 of 66 right)" in seven  # none reported: the diagonal's share
    assert re.findall(r'<text class="total"[^>]*>(\d+)</text>', seven) == ["11", "0", "11", "11", "11", "11", "11"]

    assert confusions_of({"humaneval": {"pass@1": 1.0}, "codeclone": {
        "accuracy": 0.5, "macro_f1": 0.3, "confusion_matrix": [[1, 1], [1, 1]], "classes": ["false", "true"]}}) == {
        "codeclone": Confusion(("false", "true"), ((1, 1), (1, 1)), 0.5)}
    for bad in ({"confusion_matrix": [[1, 1]], "classes": ["a", "b"]}, {"confusion_matrix": [[1]], "classes": [1]},
                {"confusion_matrix": [[-1]], "classes": ["a"]}, {"classes": ["a"]}, [1, 2]):
        assert confusion_of(bad) is None, bad


def test_the_page_draws_the_matrices_of_the_models_that_ran_tonight():
    """page.render: the section after the per-task charts, per task each model's matrix; a model
    that failed tonight draws none; a page with no matrix has neither the section nor its style (it
    is the page it was before the classification tasks: tests/test_results.py)."""
    from codeeval.core.results import LeaderboardRow
    from codeeval.reporting.matrix import MATRIX_STYLE, Confusion
    from codeeval.reporting.page import render

    rows = [LeaderboardRow(model=m, task="codeclone", metric="accuracy", value=v, primary=True, problems=4,
                           run_id="r", date="2026-11-24", error=e) for m, v, e in (("a", 0.5, None), ("b", None, "x"))]
    matrix = {"codeclone": Confusion(("false", "true"), ((1, 1), (1, 1)), 0.5)}
    history = [("2026-11-24T195000Z", rows)]
    page = render(rows, "2026-11-24 19:50 UTC", [], None, {"b": "x"}, history, matrices={"a": matrix, "b": matrix})
    assert MATRIX_STYLE in page and page.index("<h2>Tonight per task</h2>") < page.index("Confusion matrices")
    assert re.findall(r'<div class="chart matrix" data-task="([^"]+)" data-model="([^"]+)">', page) == [
        ("codeclone", "a")]
    for plain in (render(rows, "2026-11-24 19:50 UTC", [], None, {}, history),
                  render(rows, "2026-11-24 19:50 UTC", [], None, {"b": "x"}, history, matrices={"b": matrix})):
        assert "Confusion matrices" not in plain and ".matrix" not in plain


def test_a_failed_models_row_links_the_view_of_the_run_its_values_are_from():
    """page.render: a model that failed tonight keeps its previous rows, so its name and its greyed
    cells link into the view of that earlier run (the one its rows name), each cell at its task; a
    cell with no earlier value links nowhere, nor does a leaderboard's row from before views."""
    from codeeval.core.results import LeaderboardRow
    from codeeval.reporting.page import VIEW_STYLE, render

    earlier = "views/2026-11-23T020000Z/m-0123456789ab"
    rows = [LeaderboardRow(model="m", task="humaneval", metric="pass@1", value=0.5, problems=4, run_id="r",
                           date="2026-11-23", samples="samples/2026-11-23T020000Z/m-0123456789ab", view=earlier,
                           error="ValueError: boom"),
            LeaderboardRow(model="m", task="mbpp", date="2026-11-24", error="ValueError: boom"),
            LeaderboardRow(model="old", task="humaneval", metric="pass@1", value=1.0, problems=4, run_id="o",
                           date="2026-11-24")]
    page = render(rows, "2026-11-24 02:00 UTC", [], None, {"m": "ValueError: boom"}, [("2026-11-24T020000Z", rows)])
    body = page[page.index("<tbody>"):page.index("</tbody>")]
    (failed,) = re.findall(r'<tr class="failed">(.*?)</tr>', body)
    assert re.findall(r'<a class="view" href="([^"]+)">', failed) == [
        html.escape(links.href(earlier)), html.escape(links.href(earlier, task="humaneval"))]
    assert failed.startswith(f'<td><a class="view" href="{html.escape(links.href(earlier))}">m</a> (failed)</td>')
    assert '<td class="failed-cell" data-value="-1" title="ValueError: boom">failed</td>' in failed
    (plain,) = re.findall(r"<tr><td>old</td>(.*?)</tr>", body)
    assert "<a " not in plain and VIEW_STYLE in page
    assert VIEW_STYLE not in render(rows[2:], "2026-11-24 02:00 UTC", [], None, {}, [("2026-11-24T020000Z", rows[2:])])


def paired_rows(dom: str) -> dict:
    """(model, task, against) -> the cells' text of its row in the paired comparisons."""
    out = {}
    for model, section in re.findall(r'<section class="paired" data-model="([^"]+)">(.*?)</section>', dom):
        for task, against, cells in re.findall(r'<tr data-task="([^"]+)" data-against="([^"]+)"[^>]*>(.*?)</tr>',
                                               section):
            out[html.unescape(model), task, against] = [
                " ".join(html.unescape(re.sub(r'<span class="where">.*?</span>|<[^>]+>', " ", c)).split())
                for c in re.findall(r"<td[^>]*>(.*?)</td>", cells)]
    return out


def assert_links_hold(board: Path, cell: str, task_id: str, before: bool, tonight: bool) -> None:
    """The relative links of a flipped problem lead to its sample's page in each night's view (the
    view the night's row names) and to the Parquet files holding its rows, whose verdicts are the
    ones the flip says."""
    item = cell[cell.index(f'data-problem="{task_id}"'):]
    item = item[:item.index("</li>")]
    found = re.findall(r'(before|tonight) <a class="view" href="([^"]+)">sample (\d+)</a> '
                       r'\(<a class="parquet" href="([^"]+)"', item)
    assert [(w, int(n)) for w, _, n, _ in found] == [("before", 0), ("tonight", 0)], item
    history = [pq.read_table(p).to_pylist() for p in sorted((board / "history").glob("*.parquet"))]
    views = [r["view"] for rows in history[1:] for r in rows if r["model"] == "weak-model"]  # the last two nights'
    for (_, view, sample, href), verdict, night_view in zip(found, (before, tonight), views):
        assert html.unescape(view) == links.href(night_view, task="humaneval", sample=(task_id, int(sample)))
        assert not href.startswith("/") and href.startswith("samples/"), href
        rows = pq.read_table(board / html.unescape(href)).to_pylist()
        assert [r["passed"] for r in rows if r["task_id"] == task_id and r["sample"] == int(sample)] == [verdict]


def codeeval(*args: str, cwd: Path, umask: int = 0o022) -> subprocess.CompletedProcess:
    import sys

    return subprocess.run([sys.executable, "-m", "codeeval", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=600, preexec_fn=lambda: os.umask(umask))


def mode(path: Path) -> int:
    return path.stat().st_mode & 0o777


def test_the_nightly_command_runs_the_flow_on_this_machine(prefect_api, data_dir, tmp_path):
    """`codeeval nightly models.yaml`: the laptop form of the scheduled deployment; the second
    night prints no changes; a malformed file is one line, exit 2, before any API starts. What it
    writes honours the umask: 0644 files and 0755 folders under 022 (any web server can serve the
    page), 0600 files under 077."""
    models = tmp_path / "models.yaml"
    models.write_text(f"defaults: {{data_dir: {data_dir}, allow_code_execution: true, executor: local, limit: 2}}\n"
                      "models:\n  - model: reference\n    tasks: [humaneval]\n")
    first = codeeval("nightly", str(models), "--output-dir", "board", cwd=tmp_path)
    assert first.returncode == 0, first.stderr[-2000:]
    assert "leaderboard: 1 rows, 1 changes since the previous night" in first.stdout
    rows = pq.read_table(tmp_path / "board" / "leaderboard.parquet").to_pylist()
    assert [(r["model"], r["task"], r["value"]) for r in rows] == [("reference", "humaneval", 1.0)]
    (results,) = (tmp_path / "runs").glob("*/results.json")
    written = [results, tmp_path / "board" / "index.html", tmp_path / "board" / "leaderboard.parquet",
               *(tmp_path / "board" / "history").iterdir(), *(results.parent / "humaneval").rglob("*.parquet")]
    assert {p.name: mode(p) for p in written} == {p.name: 0o644 for p in written}
    folders = [tmp_path / "board", tmp_path / "board" / "history", results.parent, results.parent / "humaneval"]
    assert {str(p): mode(p) for p in folders} == {str(p): 0o755 for p in folders}

    second = codeeval("nightly", str(models), "--output-dir", "board", cwd=tmp_path, umask=0o077)
    assert second.returncode == 0 and "1 rows, 0 changes" in second.stdout, second.stderr[-2000:]
    assert mode(tmp_path / "board" / "index.html") == mode(results) == 0o600
    assert sorted(map(mode, (tmp_path / "board" / "history").iterdir())) == [0o600, 0o644]

    models.write_text("models:\n  - model: reference\n    tasks: [no-such-task]\n")
    bad = codeeval("nightly", str(models), cwd=tmp_path)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "no-such-task" in bad.stderr, bad.stderr
