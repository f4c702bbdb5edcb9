import json

from codeeval.cli import main
from codeeval.leaderboard import load_results, table


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
    assert cells(lines[0]) == ["model", "humaneval pass@1", "humaneval pass@10", "humaneval problems",
                               "mbpp pass@1", "mbpp problems"]
    assert cells(lines[2]) == ["reference", "1.0000", "-", "164", "0.9980", "500"]
    assert cells(lines[3]) == ["demo", "0.0061", "0.0500", "40", "-", "-"]
    assert cells(lines[4]) == ["bigcode", "-", "-", "-", "0.2500", "-"]


def test_missing_results_is_a_usage_error(tmp_path, capsys):
    assert main(["leaderboard", str(tmp_path / "nothing")]) == 2
    assert "no results.json" in capsys.readouterr().err
