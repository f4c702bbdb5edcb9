"""HumanEval+ and MBPP+ (EvalPlus releases HumanEval+ v0.1.10, MBPP+ v0.2.0) judged input by
input as the evalplus package judges them (`humanevalplus`, `mbppplus` and their `-mini` /
`-noextreme` sets), or as one test program with bigcode's limits (`...-bigcode`).

Prompts, stop words and post-processing are bigcode's (HumanEval's stripped prompt; MBPP+'s
release prompt, which is bigcode's description-plus-first-assert docstring). pass@k is reported
for the plus tests (`pass@k`, base and extra inputs: EvalPlus's "humaneval+") and for the
base tests alone (`base_pass@k`). Execution: codeeval/benchmarks/evalplus/judge.py.
"""
from __future__ import annotations

from dataclasses import dataclass

from codeeval.benchmarks import humaneval, mbpp
from codeeval.benchmarks.data import check_fields, find_local, read_jsonl
from codeeval.benchmarks.evalplus.judge import DifferentialTests, OneTestProgram, group_inputs
from codeeval.benchmarks.metrics import PassAtK
from codeeval.benchmarks.spec import LoadOptions, Problem, TaskSpec, dataset_prompt
from codeeval.core.errors import UsageError

# Special oracles: where EvalPlus does not compare outputs for equality (its _special_oracle.py).
SPECIAL = {
    "humaneval": {"find_zero": "find_zero"},
    "mbpp": {"are_equivalent": "always", "sum_div": "zero_ok", "surface_Area": "pyramid",
             "digit_distance_nums": "digit_distance",
             **dict.fromkeys(["similar_elements", "find_char_long", "common_in_nested_lists", "extract_singly",
                              "larg_nnum", "intersection_array", "find_dissimilar", "Diff"], "set_eq"),
             **dict.fromkeys(["check_str", "text_match_three", "text_starta_endb"], "not_none")},
}


# what the task reads of each record (codeeval/benchmarks/data.py check_fields)
FIELDS = {"task_id": str, "prompt": str, "canonical_solution": str, "entry_point": str, "base_input": list,
          "plus_input": (list, dict), "atol": (int, float)}  # MBPP+ v0.2.0's Mbpp/793 has plus_input {}


@dataclass(frozen=True)
class Release:
    family: str  # "humaneval" | "mbpp"
    folder: str
    filename: str
    size: int
    version: str
    bigcode_timeout_s: float


RELEASES = {
    "humanevalplus": Release("humaneval", "humaneval_plus", "HumanEvalPlus.jsonl.gz", 164, "v0.1.10", 20.0),
    "humanevalplus-mini": Release("humaneval", "humaneval_plus", "HumanEvalPlus-Mini.jsonl.gz", 164, "v0.1.10", 20.0),
    "humanevalplus-noextreme": Release("humaneval", "humaneval_plus", "HumanEvalPlus-NoExtreme.jsonl.gz", 164,
                                       "v0.1.10", 20.0),
    "mbppplus": Release("mbpp", "mbpp_plus", "MbppPlus.jsonl.gz", 378, "v0.2.0", 10.0),
    "mbppplus-noextreme": Release("mbpp", "mbpp_plus", "MbppPlus-NoExtreme.jsonl.gz", 378, "v0.2.0", 10.0),
}


def _loader(release: Release):
    def load(options: LoadOptions) -> list[Problem]:
        if options.data_dir is None:
            raise UsageError(f"{release.filename} (EvalPlus {release.version}, with the test inputs) is not on the HF "
                             f"hub: pass --data-dir (expects {release.folder}/{release.filename})")
        path = find_local(options.data_dir, release.folder, [release.filename])
        records = check_fields(read_jsonl(path), FIELDS, f"data file {path}")
        if len(records) != release.size:
            raise UsageError(f"{release.filename} should have {release.size} problems, got {len(records)}")
        problems = []
        for i, r in enumerate(records):
            r = dict(r, special=SPECIAL[release.family].get(r["entry_point"], ""))  # inputs stay JSON
            prompt = r["prompt"].strip() if release.family == "humaneval" else r["prompt"]
            problems.append(Problem(r["task_id"], i, prompt, r))
            _check_inputs(problems[-1], f"data file {path}, record {i}")
        return problems

    return load


def _check_inputs(problem: Problem, where: str) -> None:
    """Every input an argument list, as the harness calls the function (`f(*inp)`): MBPP+'s
    rebuilt as the evalplus package rebuilds them; a plus_input object only when empty."""
    try:
        groups = group_inputs(problem)
        ok = all(isinstance(inp, (list, tuple)) for inputs in groups.values() for inp in inputs)
        ok = ok and all(isinstance(v, list) or v == {} for v in groups.values())
    except (TypeError, ValueError, AttributeError, IndexError, KeyError):
        ok = False
    if not ok:
        raise UsageError(f"malformed {where} ({problem.task_id}): its base_input and plus_input must be lists of "
                         "argument lists, as EvalPlus releases them")


def reference_solution(problem: Problem) -> str:
    """The canonical solution as EvalPlus runs it: the prompt followed by the canonical body."""
    return problem.record["prompt"] + problem.record["canonical_solution"]


def make(name: str) -> TaskSpec:
    release = RELEASES[name.removesuffix("-bigcode")]
    family = humaneval if release.family == "humaneval" else mbpp
    if name.endswith("-bigcode"):
        execution = OneTestProgram(timeout_s=release.bigcode_timeout_s)
        metrics: tuple = (PassAtK(),)
        how = f"one test program with bigcode's {release.bigcode_timeout_s:g} s limit"
    else:
        execution = DifferentialTests()
        metrics = (PassAtK(subset="plus"), PassAtK(subset="base", prefix="base_"))
        how = "judged input by input as EvalPlus does; pass@k (base + plus) and base_pass@k"
    return TaskSpec(
        name=name, family="evalplus", load=_loader(release), stop_words=family.STOP_WORDS,
        postprocess=family.postprocess, reference_solution=reference_solution, execution=execution,
        metrics=metrics, hf_dataset=f"evalplus/{release.family}plus",
        completion_prefix=dataset_prompt,  # evalplus.evaluate: problem["prompt"] + completion
        description=f"{release.filename} (EvalPlus {release.version}, {release.size} problems), {how}",
    )


TASK_NAMES = [*RELEASES, *(f"{n}-bigcode" for n in RELEASES)]
