"""PAL on GSM8K and GSM-Hard as bigcode-evaluation-harness runs it (`pal-<set>-<greedy|majority_voting>`).

The model writes `def solution():` for a word problem after 8 solved examples; the program
prints `solution()` and its last printed line (stdout and stderr as one stream, as bigcode's
`swallow_io` makes them) is the sample's answer, compared with the target within 1e-3.
Scored by AnswerAccuracy (codeeval/benchmarks/metrics.py): failed runs are discarded, then the first
answer (greedy) or the most common one (majority voting) counts.
"""
from __future__ import annotations

import io
from dataclasses import dataclass
from typing import Any, Union

from codeeval.benchmarks.data import check_fields, find_local, load_hf, read_json, read_jsonl
from codeeval.benchmarks.metrics import AnswerAccuracy
from codeeval.benchmarks.spec import LoadOptions, Problem, PythonTests, TaskSpec, Verdict
from codeeval.core.errors import UsageError
from codeeval.executors.base import PASSED, Outcome, Program

N_SHOTS = 8
MARK = "# solution in Python:"
POST_SCRIPT = "print(solution())"
STOP_WORDS = ("\n\n\n",)
# what the task reads of each record (codeeval/benchmarks/data.py check_fields)
FIELDS = {"gsm8k": {"question": str, "answer": str}, "gsmhard": {"input": str, "target": (int, float)}}
SETS = {  # name -> (HF id, HF config, split, local file, question field, size)
    "gsm8k": ("gsm8k", "main", "test", ("gsm8k", "test.jsonl"), "question", 1319),
    "gsmhard": ("reasoning-machines/gsm-hard", None, "train", ("gsm_hard", "gsmhardv2.jsonl"), "input", 1319),
}
FEWSHOT = ("bigcode_fewshot", "gsm8k_few_shot_prompts.json")
NO_ANSWER, NOT_A_NUMBER = "no_answer", "not_a_number"  # statuses of runs that exited 0 with no usable answer

Number = Union[int, float, str]


def parse_target(text: str) -> Number:
    """GSM8K's answer after '#### ': commas dropped, int, else float, else the text itself."""
    text = text.strip()
    plain = text.replace(",", "")
    try:
        float(plain)
    except ValueError:
        return text
    try:
        return int(plain)
    except ValueError:
        return float(plain)


def target(problem: Problem) -> Number:
    record = problem.record
    return record["target"] if "target" in record else parse_target(record["answer"].split("#### ")[-1])


def few_shot_prompt(question: str, examples: dict) -> str:
    shots = "".join(
        f'Q: {q}\n\n{MARK}\n\n\ndef solution():\n    """{q}"""\n{s}\n\n\n\n\n\n'
        for q, s in zip(examples["questions"][:N_SHOTS], examples["solutions"][:N_SHOTS])
    )
    return shots + f"Q: {question}\n\n{MARK}\n\n\n"


def _fewshot(options: LoadOptions) -> dict:
    if options.data_dir is None:
        raise UsageError(f"PAL's 8-shot prompts come from bigcode's {FEWSHOT[1]}: pass --data-dir "
                         f"(expects {'/'.join(FEWSHOT)})")
    path = find_local(options.data_dir, FEWSHOT[0], [FEWSHOT[1]])
    examples = read_json(path)
    if not (isinstance(examples, dict) and all(
            isinstance(examples.get(k), list) and len(examples[k]) >= N_SHOTS and all(isinstance(x, str) for x in examples[k])
            for k in ("questions", "solutions"))):
        raise UsageError(f"malformed data file {path}: expected {N_SHOTS} \"questions\" and \"solutions\" (strings)")
    return examples


def _loader(dataset: str):
    hf_id, config, split, (folder, filename), field, size = SETS[dataset]

    def load(options: LoadOptions) -> list[Problem]:
        examples = _fewshot(options)
        if options.data_dir is not None:
            path = find_local(options.data_dir, folder, [filename])
            records = check_fields(read_jsonl(path), FIELDS[dataset], f"data file {path}")
        else:
            records = check_fields(load_hf(hf_id, split, config, local_hint=f"{folder}/{filename}"), FIELDS[dataset],
                                   f"HF dataset {hf_id}")
        if len(records) != size:
            raise UsageError(f"{dataset} should have {size} problems, got {len(records)}")
        return [Problem(f"{dataset}/{i}", i, few_shot_prompt(r[field], examples), r) for i, r in enumerate(records)]

    return load


def postprocess(problem: Problem, continuation: str, extra_stops: tuple[str, ...] = ()) -> str:
    """bigcode's: the text after the prompt's 9th solution mark, cut before a next 'Q:', then the
    call that prints the answer. It cuts at no stop word (nor eos): the generation stopped there."""
    output = (problem.prompt + continuation).split(MARK, N_SHOTS + 1)[-1].strip()
    if "Q:" in output:
        output = output.split("Q:")[0]
    return output + "\n" + POST_SCRIPT


def reference_solution(problem: Problem) -> str:
    """The oracle: a program whose solution() returns the target."""
    return f"def solution():\n    return {target(problem)!r}\n{POST_SCRIPT}"


def answer_of(outcome: Outcome) -> Union[str, None]:
    """The last printed line, stripped; None when the program failed or printed nothing
    (bigcode's 'failed: ...' results)."""
    if not outcome.passed:
        return None
    lines = io.StringIO(outcome.stdout_tail).readlines()
    return lines[-1].strip() if lines else None


def is_number(answer: str) -> bool:
    """What AnswerAccuracy can compare (bigcode's float(answer))."""
    try:
        float(answer)
        return True
    except ValueError:
        return False


def matches(answer: Union[str, None], expected: Number, tol: float = 1e-3) -> bool:
    try:
        return answer is not None and abs(float(answer) - float(expected)) < tol
    except ValueError:
        return False


@dataclass(frozen=True)
class PrintedAnswer(PythonTests):
    """The program's last printed line is its answer; `passed` says whether that sample's own
    answer matches the target (the task's accuracy votes over samples first)."""

    def build(self, problem: Problem, completion: str, prepared: Any = None) -> Program:
        return Program("", completion, timeout_s=self.timeout_s, guard=self.guard, merge_stderr=True)

    def judge(self, problem: Problem, outcome: Outcome, prepared: Any = None) -> Verdict:
        """`status`: the sandbox's for a run that failed; for one that exited 0, `no_answer` (it
        printed nothing) or `not_a_number` (its answer is no number) where AnswerAccuracy cannot use
        the answer, else `passed`. With one sample per problem every status but `passed` is one
        of the problems counted in `num_failed_execution` (docs/usage.md)."""
        answer = answer_of(outcome)
        detail = outcome.detail or ("" if answer is not None else "printed nothing")
        status = outcome.status
        if outcome.passed:
            status = NO_ANSWER if answer is None else PASSED if is_number(answer) else NOT_A_NUMBER
        return Verdict(status, matches(answer, target(problem)), answer=answer, detail=detail)


def make(name: str) -> TaskSpec:
    _, dataset, vote = name.split("-", 2)
    return TaskSpec(
        name=name, family="pal", load=_loader(dataset), stop_words=STOP_WORDS, postprocess=postprocess,
        reference_solution=reference_solution,
        execution=PrintedAnswer(lambda problem, completion: completion, timeout_s=3.0),
        metrics=(AnswerAccuracy(target, vote="majority" if vote == "majority_voting" else "first"),),
        hf_dataset=SETS[dataset][0],
        description=f"PAL on {dataset} ({SETS[dataset][5]} problems), 8-shot, "
                    + ("majority vote over samples" if vote == "majority_voting" else "first answer (greedy)"),
    )


TASK_NAMES = [f"pal-{d}-{v}" for d in SETS for v in ("greedy", "majority_voting")]
