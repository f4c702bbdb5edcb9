"""results.json and the leaderboard as types (codeeval/core/results.py), against what the release
before them wrote: tests/fixtures/results/ holds its results.json files (the demo's runs, a replay
that saved its generations, a generation-only run), the leaderboard.parquet its nightly code made
of them, and the CLI tables and leaderboard page it printed for them. Reading them into the types
and writing them back gives the same bytes."""
import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from codeeval.core import artifacts
from codeeval.core.results import LEADERBOARD_SCHEMA, LeaderboardRow, RunResults
from codeeval.pipeline.config import RunConfig
from codeeval.reporting import nightly, page
from codeeval.reporting.leaderboard import load_results, scores, table
from codeeval.reporting.summary import results_table

FIXTURES = Path(__file__).parent / "fixtures" / "results"
RESULTS = sorted(FIXTURES.glob("*.json"))
FAILED = "RunFailed: 1 shards failed"


@pytest.mark.parametrize("path", RESULTS, ids=lambda p: p.stem)
def test_a_results_json_of_the_release_reads_and_writes_back_byte_for_byte(path, tmp_path):
    results = RunResults.from_json(json.loads(path.read_text(encoding="utf-8")))
    assert results.tasks and results.run_id and results.model == results.config["model"]
    written = artifacts.write_json(tmp_path / "results.json", results.to_json())  # publish's writer
    assert written.read_bytes() == path.read_bytes()


def test_bigcodes_own_results_json_has_no_codeeval_block_and_keeps_none():
    data = {"humaneval": {"pass@1": 0.25}, "config": {"model": "bigcode"}}
    results = RunResults.from_json(data)
    assert (results.run_id, results.tasks, results.primary("humaneval")) == (None, {}, "pass@1")
    assert results.to_json() == data


def _rows() -> list[LeaderboardRow]:
    """What the release's nightly code made of the fixtures (how leaderboard.parquet was written)."""
    rows = [row for path in RESULTS for row in nightly.rows_of(
        RunResults.from_json(json.loads(path.read_text())), "2026-11-26", f"samples/2026-11-26T020000Z/{path.stem}")]
    return rows + nightly.failed_rows(rows, "reference", ["humaneval", "ds1000-all-completion"], FAILED, "2026-11-26")


ADDED = ["view"]  # the columns added since the release (the night's view: reporting/view/nights.py); null in its file


def test_the_leaderboard_schema_is_the_rows_fields_and_the_releases_schema(tmp_path):
    """The release's columns as they were, and the columns added since: its file reads back into
    the rows (the new columns None) and they write back as its table plus those columns, all null."""
    released = pq.read_table(FIXTURES / "leaderboard.parquet")
    assert [n for n in LEADERBOARD_SCHEMA.names if n not in released.schema.names] == ADDED
    kept = LEADERBOARD_SCHEMA
    for name in ADDED:
        kept = kept.remove(kept.get_field_index(name))
    assert kept.equals(released.schema)
    assert LEADERBOARD_SCHEMA.names == list(LeaderboardRow.__dataclass_fields__)
    rows = _rows()
    assert any(r.error for r in rows) and any(r.stderr is not None for r in rows)
    written = pq.read_table(nightly.write_leaderboard(tmp_path / "leaderboard.parquet", rows))
    assert written.drop_columns(ADDED).equals(released)
    assert all(written.column(name).null_count == len(written) for name in ADDED)
    assert nightly.read_leaderboard(FIXTURES / "leaderboard.parquet") == rows


def test_the_cli_tables_and_the_page_print_as_the_release_did():
    results = [RunResults.from_json(json.loads(p.read_text())) for p in RESULTS]
    printed = "".join(f"== {p.name}\n{results_table(r)}\n" for p, r in zip(RESULTS, results))
    loaded = load_results([str(p) for p in RESULTS])
    printed += f"== leaderboard\n{table(loaded)}\n== leaderboard --scores\n{scores(loaded)}\n"
    assert printed == (FIXTURES / "tables.txt").read_text()
    rows = nightly.read_leaderboard(FIXTURES / "leaderboard.parquet")
    html = page.render(rows, "2026-11-26 02:00 UTC", nightly.changes(rows[:3], rows), "2026-11-25",
                       {"reference": FAILED}, [("2026-11-25T020000Z", rows[:3]), ("2026-11-26T020000Z", rows)])
    assert html == (FIXTURES / "index.html").read_text()


def test_a_run_config_comes_back_from_its_dict():
    config = RunConfig.from_dict({"model": "m", "tasks": ["humaneval"], "generation": {"n_samples": 3}, "limit": 2})
    assert config.generation.n_samples == 3 and RunConfig.from_dict(config.to_dict()) == config
    assert RunConfig.from_dict({"model": "m", "tasks": ["mbpp"]}).generation == RunConfig("m", ["mbpp"]).generation
