"""The nightly leaderboard with CODEEVAL_STORAGE a URL (file://: a real fsspec store) and its folder
the shared one under it, on a real Prefect API: three nights on two hosts, each with its own mirror
(CODEEVAL_CACHE), the first and the third on one host and the second on the other, so each night
reads the one before from the store, and the third prunes the first's copies and views (KEEP_NIGHTS
set to 2). Then a host that never ran a night fetches the leaderboard folder from the store: it holds
what the store holds (the page, the leaderboard, the history, the samples/ copies and the views/ of
the two nights kept, nothing of the first), and every link of the page and of each view opens a file
there, as it does in the store itself (the folder a team serves over HTTP)."""
from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import pyarrow.parquet as pq
from page_links import assert_links_resolve

from codeeval.reporting.view import links

MODELS = """
defaults: {{data_dir: {data_dir}, allow_code_execution: true, executor: local, limit: 4, shard_size: 2}}
models:
  - model: reference
    tasks: [humaneval]
  - model: weak-model
    backend: replay
    load_generations_path: {saved}
    tasks: [humaneval]
    generation: {{n_samples: 1, temperature: 0.0}}
"""


def replayed(path: Path, solutions: list[str], right: set[int]) -> None:
    """Saved generations of HumanEval/0..3: the canonical solution where `right`, else `return None`."""
    path.write_text("".join(json.dumps({"task_id": f"HumanEval/{i}", "completion": solutions[i] if i in right else
                                        "\n    return None\n"}) + "\n" for i in range(4)))


def files(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()}


def test_the_nightly_output_is_in_the_store_and_its_links_resolve_from_a_fresh_mirror(
        prefect_api, data_dir, tmp_path, monkeypatch):
    from codeeval.core import storage
    from codeeval.flows.nightly import nightly_leaderboard
    from codeeval.reporting import nightly, paired

    store = tmp_path / "store"
    monkeypatch.setenv("CODEEVAL_STORAGE", store.as_uri())
    monkeypatch.setattr(paired, "KEEP_NIGHTS", 2)  # the third night keeps its own and the second's
    with gzip.open(data_dir / "humaneval" / "HumanEval.jsonl.gz", "rt") as fh:
        solutions = [json.loads(line)["canonical_solution"] for line in fh][:4]
    saved, models = tmp_path / "weak.jsonl", tmp_path / "models.yaml"
    replayed(saved, solutions, {3})
    models.write_text(MODELS.format(data_dir=data_dir, saved=saved))
    nights = []
    for host in ("host-a", "host-b", "host-a"):
        monkeypatch.setenv("CODEEVAL_CACHE", str(tmp_path / host))
        if len(nights) == 2:  # HumanEval/3 pass -> fail, /0 and /1 fail -> pass: another file (this process
            saved = tmp_path / "weak-2.jsonl"  # keeps a replay backend per file path: generation/__init__.py)
            replayed(saved, solutions, {0, 1})
            models.write_text(MODELS.format(data_dir=data_dir, saved=saved))
        nights.append(nightly_leaderboard(models_file=str(models)))
    assert nights[1]["changes"] == [] and nights[2]["flips"]["weak-model"]["humaneval"] == {
        "pass_to_fail": ["HumanEval/3"], "fail_to_pass": ["HumanEval/0", "HumanEval/1"]}

    in_store = store / nightly.BOARD
    stamps = sorted(p.stem[len("leaderboard-"):] for p in (in_store / "history").glob("leaderboard-*.parquet"))
    assert len(stamps) == 3, stamps
    rows = pq.read_table(in_store / "leaderboard.parquet").to_pylist()
    assert sorted((r["model"], r["value"]) for r in rows) == [("reference", 1.0), ("weak-model", 0.5)]
    runs = sorted(r["run_id"] for r in rows)
    assert sorted(r["view"] for r in rows) == [f"views/{stamps[2]}/{run}" for run in runs]
    kept = files(in_store)
    named = [pq.read_table(in_store / "history" / f"leaderboard-{n}.parquet").to_pylist() for n in stamps]
    for folder in ("samples", "view"):  # the copies and views the last two nights name, none of the first's
        held = {"/".join(p.split("/")[:3]) for p in kept if p.startswith(f"{folder.rstrip('s')}s/")}
        assert held == {r[folder] for rows in named[1:] for r in rows}, folder
        assert not held & {r[folder] for r in named[0]}, folder
    assert {"index.html", "leaderboard.parquet", *(f"{r['view']}/index.html" for rows in named[1:] for r in rows),
            *(f"history/leaderboard-{n}.parquet" for n in stamps)} <= kept

    monkeypatch.setenv("CODEEVAL_CACHE", str(tmp_path / "host-c"))  # a host that ran no night
    board = storage.fetch_dir(storage.shared(nightly.BOARD))
    assert board.is_relative_to(tmp_path / "host-c") and files(board) == kept
    assert (board / "index.html").read_bytes() == (in_store / "index.html").read_bytes()
    for folder in (board, in_store):  # from the fresh mirror, and from the store as a web server serves it
        page = (folder / "index.html").read_text(encoding="utf-8")
        hrefs = assert_links_resolve(folder / "index.html", page)
        for run in runs:  # each score at its task in tonight's view of its run
            assert links.href(f"views/{stamps[2]}/{run}", task="humaneval") in hrefs
        for night in named[1:]:  # each flip in the view of the night before and of tonight
            (weak,) = [r["view"] for r in night if r["model"] == "weak-model"]
            assert links.href(weak, task="humaneval", sample=("HumanEval/3", 0)) in hrefs
        for view in sorted(folder.glob("views/*/*/index.html")):
            assert_links_resolve(view, view.read_text(encoding="utf-8"))
            assert re.search(r'src="data/run\.js"', view.read_text(encoding="utf-8")), view
