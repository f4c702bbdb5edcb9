import json

from codeeval.cli import main
from codeeval.leaderboard import load_results, table


def write(path, model, metrics):
    path.write_text(json.dumps({**metrics, "config": {"model": model}, "codeeval": {}}))
    return str(path)


def test_table_has_a_row_per_model_and_a_column_per_task_metric(tmp_path):
    a = write(tmp_path / "a.json", "reference", {"humaneval": {"pass@1": 1.0}, "mbpp": {"pass@1": 0.998}})
    b = write(tmp_path / "b.json", "demo", {"humaneval": {"pass@1": 0.0061, "pass@10": 0.05}})
    lines = table(load_results([a, b])).splitlines()
    assert lines[0].split("|")[1:-1] == [" model     ", " humaneval pass@1 ", " mbpp pass@1 ", " humaneval pass@10 "]
    assert lines[2].split() == ["|", "reference", "|", "1.0000", "|", "0.9980", "|", "-", "|"]
    assert lines[3].split() == ["|", "demo", "|", "0.0061", "|", "-", "|", "0.0500", "|"]


def test_only_numbers_become_columns(tmp_path):
    conala = {"bleu": 0.25, "precisions": [0.5, 0.25, 0.2, 0.1], "brevity_penalty": 1.0}
    lines = table(load_results([write(tmp_path / "a.json", "m", {"conala": conala})])).splitlines()
    assert lines[0].split("|")[1:-1] == [" model ", " conala bleu ", " conala brevity_penalty "]
    assert lines[2].split() == ["|", "m", "|", "0.2500", "|", "1.0000", "|"]


def test_missing_results_is_a_usage_error(tmp_path, capsys):
    assert main(["leaderboard", str(tmp_path / "nothing")]) == 2
    assert "no results.json" in capsys.readouterr().err
