"""CoNaLa, Concode and Spider on the real data: prompts byte for byte, post-processing, scores."""
from __future__ import annotations

import json
import shutil

import pytest

from codeeval.benchmarks.registry import get_task
from codeeval.benchmarks.spec import LoadOptions, Sample
from codeeval.core.errors import UsageError

PAD = "                   "  # the 19 spaces of indentation bigcode's f-string carries


@pytest.fixture(scope="module")
def loaded(data_dir):
    return {name: (get_task(name), get_task(name).load(LoadOptions(data_dir))) for name in ("conala", "concode", "spider")}


def test_pad_is_nineteen_spaces():
    assert PAD == " " * 19


def test_conala_prompt_is_bigcodes_byte_for_byte(loaded):
    _, problems = loaded["conala"]
    assert len(problems) == 500 and problems[0].task_id == "conala/0"
    assert problems[0].prompt == (
        "Answer the following instructions in one line of Python code:\n"
        "\nInstruction:\nconvert a list of integers into a single integer                   "
        "\nSolution:\nr = int(''.join(map(str, x)))                   "
        "\nInstruction:\nhow to convert a datetime string back to datetime object?                   "
        "\nSolution:\ndatetime.datetime.strptime(str, '%m/%d/%Y')                   "
        "\nInstruction:\nsend a signal `signal.SIGUSR1` to the current process                   "
        "\nSolution:\n")
    # rewritten_intent is null here: the intent is used
    assert problems[4].record["rewritten_intent"] is None
    assert problems[4].prompt.endswith("\nInstruction:\nHow to convert a string from CP-1251 to UTF-8?" + PAD
                                       + "\nSolution:\n")


def test_concode_prompt_takes_the_text_before_the_fields_without_its_final_period(loaded):
    _, problems = loaded["concode"]
    assert len(problems) == 2000
    assert problems[0].prompt == (
        "Answer the following instructions in a one line of Java code:\n"
        "\nInstruction:\nget the distance of map coordinates to the center                    "
        "\nSolution:\nfloat function ( int arg0 , int arg1 ) { int loc0 = arg0 - cx ; int loc1 = arg1 - cy ; "
        "return getSquaredDistance ( loc0 , loc1 ) ; }                   "
        "\nInstruction:\ncheck if details are parsed                   "
        "\nSolution:\nboolean function ( ) { return isParsed ; }                   "
        "\nInstruction:\nactually walks the bag to make sure the count is correct and resets the running total"
        "                   \nSolution:\n")
    assert problems[1].prompt.endswith("defaults to true do perform statements recovery" + PAD + "\nSolution:\n")


def test_spider_prompt_is_plain_concatenation_with_its_own_shots(loaded):
    _, problems = loaded["spider"]
    assert len(problems) == 1034
    assert problems[0].prompt == (
        "Answer the following instructions in a one line SQL query:\n"
        "\nInstruction:\nHow many heads of the departments are older than 56 ?"
        "\nSolution:\nSELECT count(*) FROM head WHERE age  >  56"
        "\nInstruction:\nList the name, born state and age of the heads of departments ordered by age."
        "\nSolution:\nSELECT name ,  born_state ,  age FROM head ORDER BY age"
        "\nInstruction:\nHow many singers do we have?"
        "\nSolution:\n")


def test_post_processing(loaded):
    conala, problems = loaded["conala"]
    p = problems[0]
    assert conala.stop_words == ("\n",)
    assert conala.postprocess(p, "  os.kill(os.getpid(), 9)\n", ("<eos>",)) == "os.kill(os.getpid(), 9)"
    # no cut at the first newline, nor at eos text: bigcode keeps what a batch ran past
    assert conala.postprocess(p, "a\nb<eos>\n", ("<eos>",)) == "a\nb<eos>"
    assert conala.postprocess(p, "x\nSolution:\ny", ()) == "x\nSolution:\ny"
    spider, problems = loaded["spider"]
    p = problems[0]
    assert spider.postprocess(p, "SELECT count(*) FROM singer  \nInstruction:\n", ()) == "SELECT count(*) FROM singer  "
    assert spider.postprocess(p, " SELECT 1<|endoftext|>", ("<|endoftext|>",)) == " SELECT 1"


def test_reference_solutions_score_one_and_perturbations_score_the_references_numbers(loaded):
    conala, problems = loaded["conala"]
    refs = [p.record["snippet"] for p in problems]
    assert [conala.reference_solution(p) for p in problems] == refs
    samples = [Sample(p.task_id, 0, r) for p, r in zip(problems, refs)]
    result = conala.metrics[0].compute(problems, samples, ())
    assert result["bleu"] == 1.0 and result["translation_length"] == result["reference_length"] == 9006
    # three predictions changed (values from tensorflow/nmt's compute_bleu over evaluate's 13a):
    # 4 tokens dropped, an empty one (11 tokens), 2 added -> 8993 of 9006 tokens
    preds = list(refs)
    preds[0], preds[1], preds[2] = "os.kill(os.getpid())", "", refs[2] + " + 1"
    result = conala.metrics[0].compute(problems, [Sample(p.task_id, 0, x) for p, x in zip(problems, preds)], ())
    assert result["bleu"] == pytest.approx(0.99821824428307, rel=1e-12)
    assert result["translation_length"] == 8993 and result["brevity_penalty"] == pytest.approx(0.99855547555555)

    concode, problems = loaded["concode"]
    preds = [p.record["code"].replace(" ; }", " }") for p in problems]
    result = concode.metrics[0].compute(problems, [Sample(p.task_id, 0, x) for p, x in zip(problems, preds)], ())
    assert result["bleu"] == pytest.approx(0.9202560186417486, rel=1e-12)
    assert result["precisions"] == pytest.approx([1.0, 0.9581709794518267, 0.9441382161435905, 0.9321368680201234])

    spider, problems = loaded["spider"]
    preds = [p.record["query"] for p in problems]
    preds[0], preds[5] = "SELECT count(*) FROM singers", "SELECT name FROM singer"
    result = spider.metrics[0].compute(problems, [Sample(p.task_id, 0, x) for p, x in zip(problems, preds)], ())
    assert result == {"bleu": pytest.approx(0.9992775697920865, rel=1e-12)}


def test_these_tasks_execute_nothing():
    for name in ("conala", "concode", "spider"):
        spec = get_task(name)
        assert not spec.executes and spec.primary == "bleu"


def test_without_a_data_dir_the_few_shot_file_is_asked_for():
    with pytest.raises(UsageError, match="--data-dir.*bigcode_fewshot/conala_few_shot_prompts.json"):
        get_task("conala").load(LoadOptions(None))


def test_a_data_dir_without_the_split_or_with_the_wrong_one_is_refused(data_dir, tmp_path):
    shutil.copytree(data_dir / "bigcode_fewshot", tmp_path / "bigcode_fewshot")
    with pytest.raises(UsageError, match="expected concode/dev.json"):
        get_task("concode").load(LoadOptions(tmp_path))
    (tmp_path / "concode").mkdir()
    # Concode's test.json has no targets: as dev.json it is refused before anything is scored
    shutil.copy(data_dir / "concode" / "test.json", tmp_path / "concode" / "dev.json")
    with pytest.raises(UsageError, match="no record has a 'code'"):
        get_task("concode").load(LoadOptions(tmp_path))
    (tmp_path / "concode" / "dev.json").write_text(json.dumps({"nl": "x", "code": "y"}) + "\n")
    with pytest.raises(UsageError, match="concode should have 2000 problems, got 1"):
        get_task("concode").load(LoadOptions(tmp_path))
