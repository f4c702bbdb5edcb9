import json

from codeeval.cli import main
from codeeval.reporting.leaderboard import load_results, scores, table


def write(path, model, metrics, problems=None):
    tasks = {task: {"problems": n} for task, n in (problems or {}).items()}
    path.write_text(json.dumps({**metrics, "config": {"model": model}, "codeeval": {"tasks": tasks}}))
    return str(path)


def test_table_has_a_row_per_model_and_per_task_its_metrics_and_problems(tmp_path):
    a = write(tmp_path / "a.json", "reference", {"humaneval": {"pass@1": 1.0}, "mbpp": {"pass@1": 0.998}},
              {"humaneval": 164, "mbpp": 500})
    b = write(tmp_path / "b.json", "demo", {"humaneval": {"pass@1": 0.0061, "pass@10": 0.05}}, {"humaneval": 40})
    c = write(tmp_path / "c.json", "bigcode", {"mbpp": {"pass@1": 0.25}})  # no codeeval block: problems unknown
    lines = table(load_results([a, b, c])).splitlines()
    cells = lambda line: [c.strip() for c in line.split("|")[1:-1]]  # noqa: E731
    assert cells(lines[0]) == ["model", "humaneval pass@1", "humaneval problems", "mbpp pass@1", "mbpp problems"]
    assert cells(lines[2]) == ["reference", "1.0000", "164", "0.9980", "500"]
    assert cells(lines[3]) == ["demo", "0.0061", "40", "-", "-"]
    assert cells(lines[4]) == ["bigcode", "-", "-", "0.2500", "-"]


def test_each_task_shows_its_primary_metric(tmp_path):
    conala = {"precisions": [0.5, 0.25, 0.2, 0.1], "bleu": 0.25, "brevity_penalty": 1.0}
    pal = {"accuracy": 0.5, "num_failed_execution": 3}
    plus = {"pass@1": 0.75, "base_pass@1": 0.8}
    path = tmp_path / "a.json"
    path.write_text(json.dumps({"conala": conala, "pal-gsm8k-greedy": pal, "humanevalplus": plus,
                                "config": {"model": "m"},
                                "codeeval": {"tasks": {"conala": {"primary": "bleu", "problems": 500},
                                                       "pal-gsm8k-greedy": {"primary": "accuracy", "problems": 9}}}}))
    lines = table(load_results([str(path)])).splitlines()
    assert [c.strip() for c in lines[0].split("|")[1:-1]] == [
        "model", "conala bleu", "conala problems", "pal-gsm8k-greedy accuracy", "pal-gsm8k-greedy problems",
        "humanevalplus pass@1", "humanevalplus problems"]
    assert lines[2].split() == ["|", "m", "|", "0.2500", "|", "500", "|", "0.5000", "|", "9", "|", "0.7500", "|",
                                "-", "|"]


def test_missing_results_is_a_usage_error(tmp_path, capsys):
    assert main(["leaderboard", str(tmp_path / "nothing")]) == 2
    assert "no results.json" in capsys.readouterr().err
    (tmp_path / "list.json").write_text("[]")
    assert main(["leaderboard", str(tmp_path / "list.json")]) == 2
    assert "list.json is not a results.json file (not a JSON object)" in capsys.readouterr().err


def test_a_first_night_where_every_model_failed_still_lists_them_with_their_cause(tmp_path):
    """No previous leaderboard and no score at all: the page names each model, its whole cause,
    its tasks as `failed`, and a trend of one night with no point; the parquet keeps the rows."""
    from codeeval.core.errors import RunFailed
    from codeeval.reporting import nightly, page as leaderboard_html

    error = RunFailed("1 shards failed (...):\n  generate-mbpp-shard-000: OSError: no such file\n  not run: score-mbpp")
    cause = nightly.failure_cause(error)
    assert cause.splitlines() == ["1 shards failed (...):", "generate-mbpp-shard-000: OSError: no such file",
                                  "not run: score-mbpp"]
    try:
        try:
            raise KeyError("vocab")
        except KeyError as inner:
            raise ValueError("could not load\nthe tokenizer") from inner
    except ValueError as outer:
        assert nightly.failure_cause(outer) == "KeyError: 'vocab'"  # the chain's root, not its first line

    rows = nightly.failed_rows([], "m", ["mbpp", "humaneval"], cause, "2026-11-24")
    board = tmp_path / "board"
    nightly.write_leaderboard(board / "leaderboard.parquet", rows)
    nightly.write_leaderboard(nightly.history_path(board, "2026-11-24T020000Z"), rows)
    nightly.write_leaderboard(nightly.history_path(board, "2026-11-24T020000Z"), rows)  # the same second
    history = nightly.read_history(board)
    assert [night for night, _ in history] == ["2026-11-24T020000Z", "2026-11-24T020000Z_2"]
    assert nightly.changes([], nightly.read_leaderboard(board / "leaderboard.parquet")) == []
    page = leaderboard_html.render(rows, "2026-11-24 (2026-11-24T020000Z)", [], None, {"m": cause}, history[:1])
    assert '<tr class="failed"><td>m (failed)</td>' in page and page.count('class="failed-cell"') == 2
    assert "generate-mbpp-shard-000: OSError: no such file" in page and "not run: score-mbpp" in page
    assert "0 changes (no previous leaderboard)" in page and "No metric changed." in page
    assert page.count('data-nights="1"') == 2 and page.count('data-values=""') == 2
    assert "<rect" not in page and "<circle" not in page


def test_a_leaderboard_from_before_the_samples_were_kept_is_said_in_one_line(tmp_path):
    """Rows of an older leaderboard (no stderr, interval or samples columns) render, with no interval
    and no error bar, and each comparison that needs their samples says why it was not made; a
    copy under samples/ that no recent night names is pruned."""
    import dataclasses

    import pyarrow as pa
    import pyarrow.parquet as pq

    from codeeval.core.results import LeaderboardRow
    from codeeval.reporting import nightly, page as leaderboard_html, paired as leaderboard_paired

    old = {"model": "m", "task": "humaneval", "metric": "pass@1", "value": 0.5, "primary": True, "problems": 4,
           "run_id": "m-1", "date": "2026-11-23", "error": None}
    board = tmp_path / "board"
    board.mkdir()
    pq.write_table(pa.Table.from_pylist([old]), board / "leaderboard.parquet")  # its columns only
    previous = nightly.read_leaderboard(board / "leaderboard.parquet")
    assert previous[0].samples is None and previous[0].ci95_low is None
    row = LeaderboardRow(**old)
    tonight = [dataclasses.replace(row, date="2026-11-24", samples="samples/2026-11-24T020000Z/m-1"),
               dataclasses.replace(row, model="n", value=0.75, run_id="n-1", date="2026-11-24",
                                   samples="samples/2026-11-24T020000Z/gone")]
    paired = leaderboard_paired.compare_nights(board, tonight, previous, {})
    why = {(p.model, p.against): p.why for p in paired}
    assert why["m", "previous night"].startswith("humaneval: no copy of the samples kept")
    assert why["n", "previous night"] == "no previous night"
    assert why["n", "best model"] == "the best model on humaneval tonight"
    assert why["m", "best model"].startswith("humaneval: not compared: FileNotFoundError")  # both copies missing
    assert all("\n" not in p.why for p in paired)
    page = leaderboard_html.render(previous, "2026-11-23 02:00 UTC", [], None, {}, [("2026-11-23", previous)], paired)
    assert 'class="ci"' not in page and 'class="errorbar"' not in page and "<rect" in page
    assert "no copy of the samples kept" in page and '<section class="paired" data-model="m">' in page

    for rel in ("samples/2026-11-22T020000Z/m-1", "samples/2026-11-24T020000Z/m-1"):
        (board / rel / "humaneval").mkdir(parents=True)
    removed = leaderboard_paired.prune(board, [tonight])
    assert removed == [board / "samples/2026-11-22T020000Z/m-1"]
    assert sorted(p.name for p in (board / "samples").iterdir()) == ["2026-11-24T020000Z"]


def test_scores_carry_the_standard_error_interval_and_problems(tmp_path, capsys):
    """With stderr/ci95 in results.json the table shows ± SE and `--scores` one line per run and
    task with the 95% interval; tasks in order of first appearance, runs in order within a task."""
    def run(name, model, tasks):
        path = tmp_path / name
        path.write_text(json.dumps({**{t: {m: v} for t, (m, v, se, ci, n) in tasks.items()}, "config": {"model": model},
                                    "codeeval": {"tasks": {t: {"primary": m, "problems": n, "stderr": {m: se},
                                                               "ci95": {m: ci}} for t, (m, v, se, ci, n) in tasks.items()}}}))
        return str(path)

    a = run("a.json", "ref", {"humaneval": ("pass@1", 1.0, 0.0, [1.0, 1.0], 164)})
    b = run("b.json", "weak", {"conala": ("bleu", 0.1016, 0.0274, [0.0583, 0.1321], 2),
                               "humaneval": ("pass@1", 0.25, 0.125, [0.005, 0.495], 8)})
    assert table(load_results([a, b])).splitlines()[3].split("|")[2].strip() == "0.2500 ± 0.1250"
    assert main(["leaderboard", "--scores", a, b]) == 0
    lines = [line.split() for line in capsys.readouterr().out.splitlines()]
    assert lines[0] == ["task", "metric", "model", "score", "±", "SE", "95%", "interval", "problems"]
    assert lines[1:] == [["humaneval", "pass@1", "ref", "1.0000", "±", "0.0000", "[1.0000,", "1.0000]", "164"],
                         ["humaneval", "pass@1", "weak", "0.2500", "±", "0.1250", "[0.0050,", "0.4950]", "8"],
                         ["conala", "bleu", "weak", "0.1016", "±", "0.0274", "[0.0583,", "0.1321]", "2"]]


def test_a_model_behind_an_api_shows_its_tokens(tmp_path):
    """results.json's `api` usage: the markdown table and the nightly page give tokens per model."""
    from codeeval.reporting import nightly, page as leaderboard_html

    api = {"humaneval": {"problems": 8, "primary": "pass@1",
                         "api": {"prompt_tokens": 861, "completion_tokens": 208, "requests_sent": 8}},
           "mbpp": {"problems": 5, "primary": "pass@1", "api": {"prompt_tokens": 1000, "completion_tokens": 100}}}
    served = tmp_path / "served.json"
    served.write_text(json.dumps({"humaneval": {"pass@1": 0.125}, "mbpp": {"pass@1": 0.2}, "config": {"model": "gpt-x"},
                                  "codeeval": {"tasks": api}}))
    local = write(tmp_path / "local.json", "local", {"humaneval": {"pass@1": 0.5}}, {"humaneval": 8})
    lines = table(load_results([str(served), local])).splitlines()
    assert lines[0].rstrip("| ").endswith("tokens (prompt + completion)")
    assert lines[2].rstrip("| ").endswith("1,861 + 308") and lines[3].rstrip("| ").endswith("-")
    rows = nightly.rows_of(load_results([str(served)])[0], "2026-11-24")
    assert {(r.task, r.prompt_tokens, r.completion_tokens) for r in rows} == {("humaneval", 861, 208),
                                                                              ("mbpp", 1000, 100)}
    nightly.write_leaderboard(tmp_path / "board.parquet", rows)  # the schema holds them
    page = leaderboard_html.render(rows, "2026-11-24 (t)", [], None, {}, [("t", rows)])
    assert "<th>tokens (prompt + completion)</th>" in page and 'data-value="2169"' in page and "1,861 + 308" in page
