"""CodeXGLUE code-to-text on fixtures in the HF `code_x_glue_ct_code_to_text` row format
(tests/fixtures/codexglue_code_to_text/<language>/test.jsonl, invented functions).

Every expected prompt, completion and reference below is also what bigcode's own task code
returns for these rows (with mosestokenizer's Perl for the references, `-rbug` names)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from codeeval.benchmarks.codexglue import code_to_text
from codeeval.benchmarks.registry import get_task
from codeeval.benchmarks.spec import LoadOptions, Sample
from codeeval.core.errors import UsageError

FIXTURES = Path(__file__).parent / "fixtures"
SUFFIX_PY = '\n""" The goal of this function is to:\n'
SUFFIX_C = "\n/* The goal of this function is to:\n"


def load(name: str, data_dir: Path = FIXTURES):
    spec = get_task(name)
    return spec, spec.load(LoadOptions(data_dir))


def test_the_task_names():
    assert set(code_to_text.TASK_NAMES) == {
        f"codexglue_code_to_text-{lang}{bug}" for lang in ("python", "go", "ruby", "java", "javascript", "php")
        for bug in ("", "-rbug")} | {"codexglue_code_to_text-python-left", "codexglue_code_to_text-python-left-rbug"}
    for name in code_to_text.TASK_NAMES:
        assert not get_task(name).executes and get_task(name).primary == "blue"


def test_python_prompt_drops_the_docstring_and_its_quotes():
    spec, problems = load("codexglue_code_to_text-python")
    assert [p.task_id for p in problems] == ["python/0", "python/1", "python/2", "python/3"]
    assert [p.prompt for p in problems] == [
        "def add(a, b):\n    total = a + b\n    return total" + SUFFIX_PY,
        # r\"\"\": the r stays, every triple quote after the docstring goes
        "def first_match(p, s):\n    r\n    \n    return re.search(p, s)" + SUFFIX_PY,
        "def name(self):\n        return self._name or anonymous" + SUFFIX_PY,
        # a one-quote docstring: its opening quote is cut with the space before it, the closing one stays
        'def double(x):"\n    return 2 * x' + SUFFIX_PY,
    ]
    assert spec.stop_words == ("'''", '"""')


def test_left_prompt_is_the_signature_up_to_an_opening_triple_quote():
    spec, problems = load("codexglue_code_to_text-python-left")
    assert [p.prompt for p in problems] == ['def add(a, b):\n    """', 'def first_match(p, s):\n    r"""',
                                            'def name(self):\n        """', 'def double(x):\n   """']


@pytest.mark.parametrize("lang,prompt", [
    ("go", "func Add(a, b int) int {\n\treturn a + b\n}" + SUFFIX_C),
    ("ruby", "def add(a, b)\n  a + b\nend\n=begin The goal of this function is to:\n"),
    ("java", "public int add(int a, int b) {\n    return a + b;\n}" + SUFFIX_C),
    ("javascript", "function add(a, b) {\n  return a + b;\n}" + SUFFIX_C),
    ("php", "public function add($a, $b)\n{\n    return $a + $b;\n}" + SUFFIX_C),
])
def test_other_languages_prompt_with_the_whole_code(lang, prompt):
    spec, problems = load(f"codexglue_code_to_text-{lang}")
    assert [p.prompt for p in problems] == [prompt] and spec.stop_words == ("\n",)
    assert spec.postprocess(problems[0], "  Adds a and b.  \n*/", ()) == "Adds a and b.  "  # stripped, then cut


def test_postprocessing_keeps_the_first_line():
    spec, problems = load("codexglue_code_to_text-python")
    assert spec.postprocess(problems[0], ' Return the sum of a and b.\n"""', ()) == "Return the sum of a and b."
    assert spec.postprocess(problems[0], "\n\nx", ()) == "x"
    assert spec.postprocess(problems[0], "Sum.<|endoftext|>", ("<|endoftext|>",)) == "Sum.<|endoftext|>"


def test_left_postprocessing_cuts_at_the_closing_triple_quote():
    spec, problems = load("codexglue_code_to_text-python-left")
    p = problems[0]
    assert spec.postprocess(p, 'Return the sum.\n"""', ()) == "Return the sum."
    assert spec.postprocess(p, "\n  two\n", ()) == "two"
    # bigcode then looks for ''' in what follows the first triple quote, and starts again after it
    assert spec.postprocess(p, " Gets a name.'''x\n", ()) == "x"
    assert spec.postprocess(p, "Doubles x. '''\n", ()) == ""


def test_references_are_the_detokenized_docstring_tokens_and_rbug_drops_a_leading_r():
    expected = {
        "python": ["Return the sum of a and b.", "returns the first match of p in s.",
                   "Gets the user 's name (or anonymous).", "Double x."],
        "ruby": ["Returns the sum of + a + and + b +."],
        "java": ["return the sum of {@code a} and {@code b}."],
        "javascript": ["Adds two numbers (a b)."],
        "php": ["Add two values and return the result 's sum."],
        "go": ["Add returns the sum of a and b."],
    }
    for lang, refs in expected.items():
        spec, problems = load(f"codexglue_code_to_text-{lang}")
        assert [spec.reference_solution(p) for p in problems] == refs
        bug, problems = load(f"codexglue_code_to_text-{lang}-rbug")
        assert [bug.reference_solution(p) for p in problems] == [r[1:] if r[0] == "r" else r for r in refs]
    spec, problems = load("codexglue_code_to_text-python-left-rbug")
    assert spec.reference_solution(problems[1]) == "eturns the first match of p in s."


def test_scores_100_for_the_references_and_the_rbug_reference_penalises_a_correct_answer():
    for name in ("codexglue_code_to_text-python", "codexglue_code_to_text-python-rbug"):
        spec, problems = load(name)
        samples = [Sample(p.task_id, 0, spec.reference_solution(p)) for p in problems]
        assert spec.metrics[0].compute(problems, samples, ()) == {"blue": 100.0}
    spec, problems = load("codexglue_code_to_text-python")
    right = [Sample(p.task_id, 0, code_to_text.reference(p)) for p in problems]
    bug, _ = load("codexglue_code_to_text-python-rbug")
    # problem 1 against "eturns the first match of p in s.": unigrams 8/9, then (7+1)/(8+1), 7/8, 6/7
    one = (8 / 9 * 8 / 9 * 7 / 8 * 6 / 7) ** 0.25
    assert bug.metrics[0].compute(problems, right, ())["blue"] == pytest.approx((300 + 100 * one) / 4)


def test_an_empty_docstring_gives_an_empty_reference(tmp_path):
    row = json.loads((FIXTURES / "codexglue_code_to_text" / "go" / "test.jsonl").read_text())
    (tmp_path / "go").mkdir()
    (tmp_path / "go" / "test.jsonl").write_text(json.dumps(dict(row, docstring_tokens=[])) + "\n")
    spec, problems = load("codexglue_code_to_text-go-rbug", tmp_path)
    assert spec.reference_solution(problems[0]) == ""


def test_a_docstring_missing_from_its_code_is_a_usage_error(tmp_path):
    row = json.loads((FIXTURES / "codexglue_code_to_text" / "python" / "test.jsonl").read_text().splitlines()[0])
    (tmp_path / "python").mkdir()
    (tmp_path / "python" / "test.jsonl").write_text(json.dumps(dict(row, docstring="not there")) + "\n")
    with pytest.raises(UsageError, match="record 0: its docstring is not part of its code"):
        load("codexglue_code_to_text-python", tmp_path)


def test_without_a_data_dir_an_offline_machine_is_told_to_pass_one(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(UsageError, match="code_x_glue_ct_code_to_text.*--data-dir.*codexglue_code_to_text/ruby/test.jsonl"):
        get_task("codexglue_code_to_text-ruby").load(LoadOptions(None))
