"""MBPP as bigcode-evaluation-harness runs it (test split: task ids 11-510)."""
from __future__ import annotations

from codeeval.benchmarks.data import check_fields, find_local, load_hf, read_jsonl
from codeeval.benchmarks.metrics import PassAtK
from codeeval.benchmarks.spec import LoadOptions, Problem, PythonTests, TaskSpec
from codeeval.benchmarks.text import prompt_plus_cut
from codeeval.core.errors import UsageError

HF_DATASET = "mbpp"
# what the task reads of each record (codeeval/benchmarks/data.py check_fields); test_setup_code: mbpp-setup, below
FIELDS = {"task_id": (int, str), "text": str, "code": str, "test_list": list}
STOP_WORDS = ("\nclass", "\nassert", '\n"""', "\nprint", "\nif", "\n<|/", "\n```")


def load(options: LoadOptions) -> list[Problem]:
    if options.data_dir is not None:
        path = find_local(options.data_dir, "mbpp", ["mbpp.jsonl"])
        records = _checked(read_jsonl(path), f"data file {path}")
        records = [r for r in records if 11 <= int(r["task_id"]) <= 510]
    else:
        records = _checked(load_hf(HF_DATASET, "test", local_hint="mbpp/mbpp.jsonl"), f"HF dataset {HF_DATASET}")
    if len(records) != 500:  # bigcode asserts this too: a wrong split would silently change scores
        raise UsageError(f"MBPP test split should have 500 problems (task ids 11-510), got {len(records)}")
    return [Problem(str(r["task_id"]), i, get_prompt(r), r) for i, r in enumerate(records)]


def _checked(records: list, where: str) -> list[dict]:
    check_fields(records, FIELDS, where)
    for n, r in enumerate(records):
        if not str(r["task_id"]).strip().isdigit() or not r["test_list"] or not all(
                isinstance(t, str) for t in r["test_list"]) or not isinstance(r.get("test_setup_code", ""), str):
            raise UsageError(f"malformed {where}: record {n} needs an integer task_id, a non-empty test_list of "
                             "strings and a string test_setup_code")
    return records


def get_prompt(record: dict) -> str:
    return '"""\n' + record["text"] + "\n" + record["test_list"][0] + '\n"""\n'


def postprocess(problem: Problem, continuation: str, extra_stops: tuple[str, ...] = ()) -> str:
    return prompt_plus_cut(problem.prompt, continuation, STOP_WORDS + extra_stops)


def program(problem: Problem, candidate: str) -> str:
    """bigcode: candidate + the asserts; test_setup_code is ignored (task 367 then fails)."""
    return candidate + "\n" + "\n".join(problem.record["test_list"])


def program_with_setup(problem: Problem, candidate: str) -> str:
    """`mbpp-setup`: the setup code runs after the candidate (it uses the candidate's classes)."""
    r = problem.record
    return candidate + "\n" + r.get("test_setup_code", "") + "\n" + "\n".join(r["test_list"])


def reference_solution(problem: Problem) -> str:
    return problem.record["code"]


def make(name: str) -> TaskSpec:
    with_setup = name == "mbpp-setup"
    return TaskSpec(
        name=name, family="mbpp", load=load, stop_words=STOP_WORDS, postprocess=postprocess,
        reference_solution=reference_solution, metrics=(PassAtK(),), hf_dataset=HF_DATASET,
        # no peer writes MBPP completion rows: the prompt as generated from, unstripped, which is
        # EvalPlus's MBPP+ prompt too (its rows continue that)
        completion_prefix=lambda p: p.prompt,
        execution=PythonTests(program_with_setup if with_setup else program, timeout_s=3.0),
        description="MBPP test split, 500 problems" + ("; honours test_setup_code" if with_setup else " (bigcode semantics)"),
    )


TASK_NAMES = ["mbpp", "mbpp-setup"]
