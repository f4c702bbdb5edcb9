"""CodeSemBench on the real task directories (../shared/data/codesembench/tasks.tar.gz, the
repository's `tasks/` and `api/testdata/tasks/`): both metadata schemas, skipped and
unreadable answers, the reference's parsing and P/R/F1, its unit-test numbers, its reports."""
from __future__ import annotations

import json
import shutil

import pytest

from codeeval.benchmarks import codesembench
from codeeval.benchmarks.codesembench import score as score
from codeeval.benchmarks.registry import get_task
from codeeval.benchmarks.spec import LoadOptions, Sample
from codeeval.core.errors import UsageError

# The reference's test_utils.MockLlm: a canned answer for the prompt that holds the key
# (the last key found wins), else ''.
MOCK_LLM = {
    "int fn (int x, int y, int *p) {": "[['p', 'm0'], ['m1']]",
    "// This is test alias2.c": "[['p0', 'p'], ['p1']]",
    "// This is test alias3.c": "[['p0', 'quxx'], ['burble', 'bloop'], ['p1', 'p[0]', 'fizz']]",
}


def mock_llm(prompt: str) -> str:
    result = ""
    for key, answer in MOCK_LLM.items():
        if key in prompt:
            result = answer
    return result


def scored(task_name, problems, completions):
    samples = [Sample(p.task_id, 0, c) for p, c in zip(problems, completions)]
    return get_task(task_name).metrics[0].compute(problems, samples, [])


@pytest.fixture(scope="module")
def tasks(data_dir):
    return get_task("codesembench").load(LoadOptions(data_dir))


def test_real_tasks_load_with_skipped_and_unreadable_answers_counted(tasks, caplog, data_dir):
    assert [p.task_id for p in tasks] == [
        "simple_c_alias/alias1.c", "simple_c_alias/alias2.c", "simple_c_alias/alias3a.c", "simple_c_alias/alias3b.c",
        "simple_c_alias/alias4.c", "simple_c_alias/alias5.c", "simple_c_escape/escape1.c", "simple_c_escape/escape2.c"]
    alias = tasks[0].record
    assert alias["metric"] == "cluster_prf1" and alias["answer_file"] == "answers/alias1.c"
    assert tasks[-1].record["metric"] == "prf1" and tasks[-1].record["answer_file"] == "answer/escape2.c"
    assert alias["task_skipped"] == {"no_answer": ["alias2a.c", "alias6.c", "alias7.c", "alias8.c", "alias9.c"],
                                     "invalid_answer": ["alias0.c"]}
    # the prompt is the program verbatim: its leading comment asks the question
    assert tasks[0].prompt.startswith("// In the following C program, which pointers must alias")
    with caplog.at_level("WARNING"):
        get_task("codesembench").load(LoadOptions(data_dir))
    assert "simple_c_alias/answers/alias0.c is not a valid answer" in caplog.text


def test_gold_answers_as_predictions_score_one_except_empty_gold(tasks):
    """F1 1.0 on every program whose gold is non-empty; alias3b.c's gold is [] and the
    reference's prf1 gives 0/0/0 for an empty gold and an empty prediction."""
    got = scored("codesembench", tasks, [codesembench.reference_solution(p) for p in tasks])
    for p in tasks:
        result = score.score_program(p.record["metric"], json.loads(codesembench.reference_solution(p)),
                                     p.record["gold"])[0]
        assert result == ({"precision": 0.0, "recall": 0.0, "f1": 0.0} if p.record["gold"] == []
                          else {"precision": 1.0, "recall": 1.0, "f1": 1.0}), p.task_id
    assert got["tasks"]["simple_c_alias"] == pytest.approx({"precision": 5 / 6, "recall": 5 / 6, "f1": 5 / 6,
                                                            "programs": 6})
    assert got["tasks"]["simple_c_escape"] == {"precision": 1.0, "recall": 1.0, "f1": 1.0, "programs": 2}
    assert got["f1"] == pytest.approx((5 / 6 + 1) / 2)
    assert (got["programs"], got["skipped_no_answer"], got["invalid_answers"]) == (8, 5, 1)
    assert got["invalid_answer_files"] == ["simple_c_alias/alias0.c"]
    assert (got["unparsed_predictions"], got["malformed_predictions"]) == (0, 0)


def test_the_references_unit_test_numbers(data_dir, tmp_path):
    """evaluation_suite_test with MockLlm on api/testdata/tasks: alias P 0.733 R 0.611 F1
    0.639; escape 0/0/0 (the mock answers '', gold is [])."""
    problems = get_task("codesembench-testdata").load(LoadOptions(data_dir))
    assert [p.task_id for p in problems] == ["simple_c_alias/alias1.c", "simple_c_alias/alias2.c",
                                             "simple_c_alias/alias3.c", "simple_c_escape/escape1.c",
                                             "simple_c_escape/escape2.c"]
    assert problems[0].record["task_skipped"] == {"no_answer": [], "invalid_answer": []}
    got = scored("codesembench-testdata", problems, [mock_llm(p.prompt) for p in problems])
    alias = got["tasks"]["simple_c_alias"]
    assert [round(alias[k], 3) for k in score.KEYS] == [0.733, 0.611, 0.639]
    assert got["tasks"]["simple_c_escape"] == {"precision": 0.0, "recall": 0.0, "f1": 0.0, "programs": 2}
    assert got["unparsed_predictions"] == 2  # '' is not JSON: the prediction is ''
    score.write_reports(got, tmp_path)
    assert (tmp_path / "eval_summary.md").read_text() == (
        "\n## simple_c_alias\n\n* precision: 0.733\n* recall: 0.611\n* f1: 0.639\n"
        "\n## simple_c_escape\n\n* precision: 0.000\n* recall: 0.000\n* f1: 0.000\n")
    summary = json.loads((tmp_path / "eval_summary.json").read_text())
    assert list(summary) == ["simple_c_alias", "simple_c_escape"] and summary["simple_c_escape"]["f1"] == 0.0


def test_parsing_and_metric_quirks_of_the_reference():
    assert score.parse_prediction("['p', 'q']") == (["p", "q"], True)
    assert score.parse_prediction("[\"o'brien\"]") == ("", False)  # the quote swap breaks apostrophes
    assert score.parse_prediction("the answer is p") == ("", False)
    # a parsed string is a set of characters
    assert score.score_program("prf1", "pq", ["p", "q"])[0] == {"precision": 1.0, "recall": 1.0, "f1": 1.0}
    # the reference raises (unhashable list) and the run dies: here the prediction counts as ''
    assert score.score_program("prf1", [["p", "q"]], ["p"]) == ({"precision": 0.0, "recall": 0.0, "f1": 0.0}, True)
    assert score.score_program("cluster_prf1", 7, [["p", "q"]])[1] is True
    # singleton clusters contribute no pair
    assert score.cluster_prf1([["p"], ["q"]], [["p"], ["q"]]) == {"precision": 0.0, "recall": 0.0, "f1": 0.0}
    assert score.cluster_prf1([["q", "p", "r"]], [["p", "q"]]) == pytest.approx(
        {"precision": 1 / 3, "recall": 1.0, "f1": 0.5})


def test_only_the_first_sample_counts(data_dir):
    problems = get_task("codesembench-testdata").load(LoadOptions(data_dir))[:1]
    samples = [Sample(problems[0].task_id, 1, "[['p', 'm0']]"), Sample(problems[0].task_id, 0, "[['p', 'm1']]")]
    got = get_task("codesembench-testdata").metrics[0].compute(problems, samples, [])
    assert got["tasks"]["simple_c_alias"]["f1"] == 0.0  # sample 0 is wrong; sample 1 would score 1.0


def task_dir(root, name, metadata, programs, answers, answer_dir="answers"):
    folder = root / "codesembench" / "tasks" / name
    (folder / answer_dir).mkdir(parents=True)
    (folder / "metadata.json").write_text(metadata if isinstance(metadata, str) else json.dumps(metadata))
    for file, text in programs.items():
        (folder / file).write_text(text)
    for file, text in answers.items():
        (folder / answer_dir / file).write_text(text)


API = {"name": "t", "description": "", "language": "PYTHON", "task_type": "per_file", "file_pattern": "*.py",
       "tags": [], "output_type": "List[str]", "authors": "", "answer_path": "gold"}


def test_a_tasks_directory_with_the_api_schema_and_its_answer_path(tmp_path):
    task_dir(tmp_path, "t", API, {"a.py": "# which names?\nx = 1\n", "b.py": "y = 2\n", "notes.txt": "no"},
             {"a.py": '["x"]', "b.py": "not json"}, answer_dir="gold")
    [problem] = get_task("codesembench").load(LoadOptions(tmp_path))
    assert problem.task_id == "t/a.py" and problem.record["gold"] == ["x"] and problem.record["metric"] == "prf1"
    assert problem.record["task_skipped"] == {"no_answer": [], "invalid_answer": ["b.py"]}


@pytest.mark.parametrize("metadata, message", [
    ("{not json", "simple/metadata.json: not valid JSON"),
    ({**API, "task_type": "per_directory"}, "task_type 'per_directory' is not supported"),
    ({**API, "metric": "bleu"}, "unknown metric 'bleu'"),
    ({**API, "language": "COBOL"}, "unknown language 'COBOL'"),
    ({"name": "t", "language": "C"}, "neither task_type nor benchmark_type"),
])
def test_bad_metadata_is_one_line_naming_the_file(tmp_path, metadata, message):
    task_dir(tmp_path, "simple", metadata, {"a.py": "x"}, {"a.py": "[]"})
    with pytest.raises(UsageError) as err:
        get_task("codesembench").load(LoadOptions(tmp_path))
    assert message in str(err.value) and "\n" not in str(err.value)


def test_missing_or_empty_data_is_one_line(tmp_path, data_dir):
    with pytest.raises(UsageError, match="expected codesembench/tasks/ or codesembench/tasks.tar.gz"):
        get_task("codesembench").load(LoadOptions(tmp_path))
    with pytest.raises(UsageError, match="not on the HF hub"):
        get_task("codesembench").load(LoadOptions(None))
    task_dir(tmp_path, "t", API, {"a.py": "x"}, {})
    with pytest.raises(UsageError, match="no program has a readable gold answer"):
        get_task("codesembench").load(LoadOptions(tmp_path))
    (tmp_path / "codesembench" / "tasks.tar.gz").write_bytes(b"garbage")
    shutil.rmtree(tmp_path / "codesembench" / "tasks")
    with pytest.raises(UsageError, match="not a readable tar.gz"):
        get_task("codesembench").load(LoadOptions(tmp_path))


def test_chat_prompts_send_the_program_and_prefill_nothing(tasks):
    from codeeval.generation import GenerationArgs
    from codeeval.generation.prompts import chat

    p = tasks[0]
    rendered = chat.render(p.prompt, GenerationArgs(instruction_tokens="<u>,<e>,<a>"), get_task("codesembench"), p)
    assert rendered.text == "<u>" + p.prompt + "<e><a>"
    assert codesembench.postprocess(p, "[['p', 'm0']][eod] more") == "[['p', 'm0']]"


def test_the_emptyok_tasks_credit_an_empty_answer_to_an_empty_gold(tasks, data_dir):
    """Not the reference's scoring: with `-emptyok`, every gold answer scores 1.0 as its own
    prediction, alias3b.c's [] included; an unparsable answer still scores 0."""
    got = scored("codesembench-emptyok", tasks, [codesembench.reference_solution(p) for p in tasks])
    assert got["tasks"]["simple_c_alias"]["f1"] == got["tasks"]["simple_c_escape"]["f1"] == got["f1"] == 1.0
    testdata = get_task("codesembench-testdata-emptyok").load(LoadOptions(data_dir))
    escape = [p for p in testdata if p.record["task"] == "simple_c_escape"]
    assert scored("codesembench-testdata-emptyok", escape, ["[]", "[]"])["f1"] == 1.0
    assert scored("codesembench-testdata-emptyok", escape, ["", "no escapes"])["f1"] == 0.0  # the mock's ''
    assert scored("codesembench-testdata-emptyok", escape, ["[]", "['p']"])["f1"] == 0.5
