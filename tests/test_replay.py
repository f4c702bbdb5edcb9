"""Saved generations: bigcode's JSON and JSONL, and clear errors for malformed files."""
from __future__ import annotations

import gzip
import json

import pytest

from codeeval.benchmarks.spec import Problem
from codeeval.errors import UsageError
from codeeval.generation.replay import parse, path_for

PROBLEMS = [Problem("T/0", 0, "def f():", {}), Problem("T/1", 1, "def g():", {})]


def test_bigcode_json_maps_positions_to_problems(tmp_path):
    path = tmp_path / "g.json"
    path.write_text(json.dumps([["a", "b"], ["c"], ["extra"]]))
    assert parse(path, PROBLEMS) == {"T/0": ["a", "b"], "T/1": ["c"]}


def test_jsonl_completion_is_appended_to_the_prompt_and_solution_is_whole(tmp_path):
    path = tmp_path / "g.jsonl"
    path.write_text('{"task_id": "T/0", "completion": " return 1"}\n{"task_id": "T/1", "solution": "x"}\n'
                    '{"task_id": "T/0", "completion": " return 2"}\n')
    assert parse(path, PROBLEMS) == {"T/0": ["def f(): return 1", "def f(): return 2"], "T/1": ["x"]}


def test_gzipped_jsonl_and_json(tmp_path):
    """Released generations often come gzipped (e.g. reflexion's GPT-4 HumanEval file)."""
    rows = '{"task_id": "T/0", "solution": "def f(): pass"}\n{"task_id": "T/1", "completion": " return 1"}\n'
    with gzip.open(tmp_path / "g.jsonl.gz", "wt", encoding="utf-8") as fh:
        fh.write(rows)
    assert parse(tmp_path / "g.jsonl.gz", PROBLEMS) == {"T/0": ["def f(): pass"], "T/1": ["def g(): return 1"]}
    with gzip.open(tmp_path / "g.json.gz", "wt", encoding="utf-8") as fh:
        fh.write(json.dumps([["a"], ["b"]]))
    assert parse(tmp_path / "g.json.gz", PROBLEMS) == {"T/0": ["a"], "T/1": ["b"]}
    (tmp_path / "plain.jsonl.gz").write_text(rows)  # named .gz but not compressed
    with pytest.raises(UsageError, match="not gzip"):
        parse(tmp_path / "plain.jsonl.gz", PROBLEMS)


def test_the_released_gpt4_humaneval_file_replays(data_dir):
    """The file `make demo` scores: one whole function per problem, every problem covered."""
    from codeeval.benchmarks.registry import get_task
    from codeeval.benchmarks.spec import LoadOptions

    problems = get_task("humaneval").load(LoadOptions(data_dir=data_dir))
    path = data_dir / "humaneval" / "released" / "reflexion_gpt4" / "simple_gpt-4_humaneval-py.jsonl.gz"
    programs = parse(path, problems)
    assert len(programs) == 164 and all(len(p) == 1 for p in programs.values())
    assert all(f"def {p.record['entry_point']}(" in programs[p.task_id][0] for p in problems)


@pytest.mark.parametrize("name,content,message", [
    ("g.json", "[[\"a\"], ", "not JSON"),
    ("g.json", '{"T/0": ["a"]}', "list of lists of strings"),
    ("g.json", '[["a"]]', "has 1 problems, the task has 2"),
    ("g.json", '[["a"], []]', "no samples for T/1"),
    ("g.jsonl", '{"task_id": "T/0"}\n', "line 1"),
    ("g.jsonl", '{"task_id": "T/0", "completion": "x"}\n', "no samples for T/1"),
])
def test_malformed_files_are_usage_errors(tmp_path, name, content, message):
    path = tmp_path / name
    path.write_text(content)
    with pytest.raises(UsageError, match=message):
        parse(path, PROBLEMS)


def test_per_task_paths(tmp_path):
    assert path_for(str(tmp_path / "gen_{task}.json"), "mbpp") == tmp_path / "gen_mbpp.json"
    (tmp_path / "gen_humaneval.json").write_text("[]")
    assert path_for(str(tmp_path / "gen.json"), "humaneval") == tmp_path / "gen_humaneval.json"
    assert path_for(str(tmp_path / "gen.json"), "mbpp") == tmp_path / "gen.json"
    (tmp_path / "gen_humaneval.jsonl.gz").write_bytes(b"")
    assert path_for(str(tmp_path / "gen.jsonl.gz"), "humaneval") == tmp_path / "gen_humaneval.jsonl.gz"
