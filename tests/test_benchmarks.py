"""Prompts, stop words and post-processing pinned to bigcode-evaluation-harness."""
from __future__ import annotations

import pytest

from codeeval.benchmarks.registry import get_task, task_names
from codeeval.benchmarks.spec import LoadOptions
from codeeval.benchmarks.text import cut_at_stop
from codeeval.core.errors import UsageError


@pytest.fixture(scope="module")
def humaneval(data_dir):
    return get_task("humaneval").load(LoadOptions(data_dir))


@pytest.fixture(scope="module")
def mbpp(data_dir):
    return get_task("mbpp").load(LoadOptions(data_dir))


def test_humaneval_prompt_is_stripped_and_unstripped_is_verbatim(data_dir, humaneval):
    raw = get_task("humaneval-unstripped").load(LoadOptions(data_dir))
    assert len(humaneval) == len(raw) == 164
    assert humaneval[0].task_id == "HumanEval/0"
    assert raw[0].prompt == raw[0].record["prompt"] and raw[0].prompt.endswith('"""\n')
    assert humaneval[0].prompt == raw[0].prompt.strip()
    assert humaneval[0].prompt.startswith("from typing import List\n\n\ndef has_close_elements(")
    assert humaneval[0].prompt.endswith('    True\n    """')


def test_humaneval_stop_words_and_postprocess(humaneval):
    task = get_task("humaneval")
    assert task.stop_words == ("\nclass", "\ndef", "\n#", "\n@", "\nprint", "\nif", "\n```", "<file_sep>")
    p = humaneval[0]
    out = task.postprocess(p, "\n    return True\n\ndef other():\n    pass", ("<|endoftext|>",))
    assert out == p.prompt + "\n    return True\n"
    # the eos text bigcode appends to the stop words cuts too
    assert task.postprocess(p, "\n    return 1<|endoftext|>junk", ("<|endoftext|>",)) == p.prompt + "\n    return 1"


def test_stop_words_never_cut_into_the_prompt(humaneval):
    """The HumanEval/0 prompt itself contains stop words ('\\ndef'); only the continuation is cut."""
    task = get_task("humaneval")
    p = humaneval[0]
    assert "\ndef" in p.prompt
    assert task.postprocess(p, "\ndef x(): pass") == p.prompt


def test_humaneval_program_is_candidate_then_tests(humaneval):
    task = get_task("humaneval")
    p = humaneval[2]
    program = task.execution.program(p, "CANDIDATE")
    assert program == "CANDIDATE\n\n" + p.record["test"] + "\ncheck(truncate_number)"


def test_mbpp_prompt_split_and_tests(mbpp):
    assert len(mbpp) == 500
    assert [p.task_id for p in mbpp[:2]] == ["11", "12"] and mbpp[-1].task_id == "510"
    first = mbpp[0]
    assert first.prompt == ('"""\nWrite a python function to remove first and last occurrence of a given '
                            'character from the string.\nassert remove_Occ("hello","l") == "heo"\n"""\n')
    task = get_task("mbpp")
    assert "\ndef" not in task.stop_words  # helper functions are allowed
    assert task.postprocess(first, "def f():\n    return 1\nassert f() == 1") == first.prompt + "def f():\n    return 1"
    assert task.execution.program(first, "C") == "C\n" + "\n".join(first.record["test_list"])


def test_mbpp_setup_variant_runs_setup_after_candidate(mbpp):
    p = next(p for p in mbpp if p.task_id == "367")
    assert get_task("mbpp").execution.program(p, "C").count("root = Node(1)") == 0
    program = get_task("mbpp-setup").execution.program(p, "C")
    assert program.startswith("C\n" + p.record["test_setup_code"])


def test_mbpp_loader_checks_the_split(tmp_path, data_dir):
    rows = (data_dir / "mbpp" / "mbpp.jsonl").read_text().splitlines()
    (tmp_path / "mbpp").mkdir()
    (tmp_path / "mbpp" / "mbpp.jsonl").write_text("\n".join(rows[:100]))
    with pytest.raises(UsageError, match="500 problems"):
        get_task("mbpp").load(LoadOptions(tmp_path))


def test_unknown_task_and_missing_data():
    with pytest.raises(UsageError, match="unknown task 'humanevil'"):
        get_task("humanevil")
    assert {"humaneval", "humaneval-unstripped", "mbpp", "mbpp-setup"} <= set(task_names())


def test_cut_at_stop_takes_the_earliest():
    assert cut_at_stop("a\nif b\nclass c", ["\nclass", "\nif"]) == "a"
    assert cut_at_stop("abc", ["", "z"]) == "abc"
