"""CoNaLa, Concode and Spider: one line of code from an instruction, 2-shot, scored by corpus
BLEU against the dataset's code (bigcode-evaluation-harness's `conala`, `concode`, and the
pre-refactor harness's `spider`).

The prompt is bigcode's `two_shot_prompt`. CoNaLa's and Concode's f-string is continued with
backslashes, so the next source line's 19 spaces of indentation follow every inserted text;
Spider's (plain concatenation, bigcode 74803114) has none. The model stops at a newline; the
completion is the text after the prompt's third "Solution:\\n".
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

from codeeval.benchmarks.codexglue.bleu import CorpusBleu
from codeeval.benchmarks.data import check_fields, check_record, find_local, load_hf, read_json, read_jsonl
from codeeval.benchmarks.spec import LoadOptions, Problem, Prompting, TaskSpec
from codeeval.benchmarks.text import cut_at_stop
from codeeval.core.errors import UsageError

PAD = " " * 19  # the indentation the backslash-continued f-string carries into the prompt
STOP_WORDS = ("\n",)
MARK = "Solution:\n"
FEWSHOT_DIR = "bigcode_fewshot"
# Spider's shots: the pre-refactor harness's lm_eval/few_shot_examples/spider_few_shot_prompts.json
SPIDER_SHOTS = {
    "instruction1": "How many heads of the departments are older than 56 ?",
    "solution1": "SELECT count(*) FROM head WHERE age  >  56",
    "instruction2": "List the name, born state and age of the heads of departments ordered by age.",
    "solution2": "SELECT name ,  born_state ,  age FROM head ORDER BY age",
}


def conala_text(record: dict) -> str:
    return (record["rewritten_intent"] if record["rewritten_intent"] else record["intent"]).strip()


def concode_text(record: dict) -> str:
    text = record["nl"].split("concode_field_sep")[0].strip()
    return text[:-1].strip() if text.endswith(".") else text


@dataclass(frozen=True)
class Dataset:
    hf_id: str
    hf_config: Optional[str]
    split: str
    local: tuple[str, str, str]  # (folder, file, "json" for one array or "jsonl")
    size: int
    entry: str  # the prompt's first line
    text: Callable[[dict], str]  # the record's instruction
    reference_field: str
    language: str
    pad: str  # what follows each inserted text
    fewshot: Optional[str]  # bigcode's few-shot file; None: SPIDER_SHOTS
    first_line: bool  # Spider's post-processing keeps the first line only
    keys: Optional[tuple[str, ...]]  # the BLEU dict's keys reported (Spider: the float alone)
    what: str
    fields: dict  # what the task reads of each record (codeeval/benchmarks/data.py check_fields)


DATASETS = {
    "conala": Dataset("neulab/conala", None, "test", ("conala", "conala-test.json", "json"), 500,
                      "Answer the following instructions in one line of Python code:\n", conala_text, "snippet",
                      "python", PAD, "conala_few_shot_prompts.json", False, None,
                      "CoNaLa curated test (500 Stack Overflow intents), one line of Python",
                      {"intent": str, "rewritten_intent": (str, type(None)), "snippet": str}),
    "concode": Dataset("code_x_glue_tc_text_to_code", None, "validation", ("concode", "dev.json", "jsonl"), 2000,
                       "Answer the following instructions in a one line of Java code:\n", concode_text, "code",
                       "java", PAD, "concode_few_shot_prompts.json", False, None,
                       "Concode (CodeXGLUE text-to-code) dev split, 2000 Java methods from their doc comment",
                       {"nl": str, "code": str}),
    "spider": Dataset("spider", None, "validation", ("spider", "dev.json", "json"), 1034,
                      "Answer the following instructions in a one line SQL query:\n",
                      lambda r: r["question"].strip(), "query", "sql", "", None, True, ("bleu",),
                      "Spider dev (1034 questions), one SQL query (bigcode's pre-refactor task)",
                      {"question": str, "query": str}),
}


def two_shot_prompt(dataset: Dataset, text: str, shots: dict) -> str:
    pad = dataset.pad
    return (dataset.entry
            + "\nInstruction:\n" + shots["instruction1"] + pad + "\n" + MARK + shots["solution1"] + pad
            + "\nInstruction:\n" + shots["instruction2"] + pad + "\n" + MARK + shots["solution2"] + pad
            + "\nInstruction:\n" + text + pad + "\n" + MARK)


def _shots(dataset: Dataset, options: LoadOptions) -> dict:
    if dataset.fewshot is None:
        return SPIDER_SHOTS
    if options.data_dir is None:
        raise UsageError(f"the 2-shot prompt comes from bigcode's {dataset.fewshot}: pass --data-dir "
                         f"(expects {FEWSHOT_DIR}/{dataset.fewshot})")
    path = find_local(options.data_dir, FEWSHOT_DIR, [dataset.fewshot])
    return check_record(read_json(path), dict.fromkeys(SPIDER_SHOTS, str), f"data file {path}")


def _records(dataset: Dataset, options: LoadOptions) -> list[dict]:
    folder, filename, fmt = dataset.local
    if options.data_dir is None:
        return check_fields(load_hf(dataset.hf_id, dataset.split, dataset.hf_config, local_hint=f"{folder}/{filename}"),
                            dataset.fields, f"HF dataset {dataset.hf_id}")
    path = find_local(options.data_dir, folder, [filename])
    return check_fields(read_jsonl(path) if fmt == "jsonl" else read_json(path), dataset.fields, f"data file {path}")


def _loader(name: str):
    dataset = DATASETS[name]

    def load(options: LoadOptions) -> list[Problem]:
        shots = _shots(dataset, options)
        records = _records(dataset, options)
        if len(records) != dataset.size:
            raise UsageError(f"{name} should have {dataset.size} problems, got {len(records)}")
        if not any(r[dataset.reference_field] for r in records):
            raise UsageError(f"{name}: no record has a {dataset.reference_field!r} to score against "
                             f"(the split without targets?)")
        return [Problem(f"{name}/{i}", i, two_shot_prompt(dataset, dataset.text(r), shots), r)
                for i, r in enumerate(records)]

    return load


def _postprocess(first_line: bool):
    def postprocess(problem: Problem, continuation: str, extra_stops: tuple[str, ...] = ()) -> str:
        """bigcode's split on the prompt's third "Solution:\\n" of prompt + generation. CoNaLa and
        Concode strip it and keep later lines and the eos text (bigcode HEAD decodes special
        tokens). Spider keeps its first line; its harness decoded without special tokens, so it
        is also cut at the eos text."""
        output = (problem.prompt + continuation).split(MARK, 3)[-1]
        if first_line:
            return cut_at_stop(output.split("\n")[0], extra_stops)
        return output.strip()

    return postprocess


def make(name: str) -> TaskSpec:
    dataset = DATASETS[name]

    def reference(problem: Problem) -> str:
        return problem.record[dataset.reference_field]

    return TaskSpec(
        name=name, family="text_to_code", load=_loader(name), stop_words=STOP_WORDS,
        postprocess=_postprocess(dataset.first_line), reference_solution=reference,
        metrics=(CorpusBleu(reference, max_order=4, smooth=True, keys=dataset.keys),),
        prompting=Prompting(language=dataset.language), hf_dataset=dataset.hf_id,
        description=f"{dataset.what}, 2-shot, corpus BLEU",
    )


TASK_NAMES = list(DATASETS)
