"""ruHumanEval (MERA) as MERA's harness scores it: `ruhumaneval` and `ruhumaneval-mera-compat`.

A record (MERA's format) holds an `instruction` template, `inputs.function` (signature and
docstring), `inputs.tests` (a *string*: the Python literal of a list of kwargs dicts), the
expected `outputs` (one `str(result)` per test; a 2-D form, rows identical, is read at row 0)
and `meta` (id, canonical_solution, entry_point). The prompt is MERA2's
`instruction.format(**inputs).strip()`; the model's continuation is cut at MERA's stop
strings, unwrapped from a ```python fence (MERA2's preprocess_generation), and appended to
`inputs.function`. The program runs in the sandbox (codeeval/benchmarks/ruhumaneval/harness.py), each
test's `str(result)` is compared with the expected output, and a sample passes iff all match.

`ruhumaneval-mera-compat` runs the program as MERA's executor does, without a globals dict,
so that top-level imports, helpers and recursion are invisible at call time (MERA's scores);
`ruhumaneval` runs it as a module (docs/deviations.md, "ruHumanEval").
"""
from __future__ import annotations

import ast
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from codeeval.benchmarks.data import read_json, read_jsonl
from codeeval.benchmarks.harness_text import harness_text
from codeeval.benchmarks.metrics import PassAtK
from codeeval.benchmarks.spec import Execution, LoadOptions, Problem, Prompting, TaskSpec, Verdict
from codeeval.benchmarks.text import cut_at_stop
from codeeval.core.errors import UsageError
from codeeval.executors.base import FAILED, PASSED, SANDBOX_ERROR, TIMEOUT, Outcome, Program

HF_DATASET = "MERA-evaluation/MERA"
STOP_WORDS = ("\nclass", "\ndef", "\n#", "\nif", "\nprint")
HARNESS = harness_text("ruhumaneval")
EXEC_LIMIT_S = 3.0  # MERA's alarm around exec(program)
TIMEOUT_S = 4.0  # MERA's join(timeout + 1): past it the sample's result is "timed out"
KS = (1, 5, 10)  # MERA draws n = 10 samples per problem
# Local files, first found wins: MERA2's HF rows (the public split has the answers), MERA1's task.json
FILES = ("public_test.jsonl", "train.jsonl", "test.jsonl", "public_test.jsonl.gz", "task.json")
PASS, WRONG, RAISED, TIMED_OUT = 1, 0, -1, -2


def _records(options: LoadOptions) -> tuple[list[dict], str]:
    if options.data_dir is None:
        raise UsageError(f"ruHumanEval is on the HF hub only ({HF_DATASET}, config ruhumaneval), which is not "
                         "used here: pass --data-dir (expects ruhumaneval/public_test.jsonl in MERA's row format)")
    data_dir = Path(options.data_dir)
    if not data_dir.is_dir():
        raise UsageError(f"data dir not found: {data_dir}")
    for name in FILES:
        path = data_dir / "ruhumaneval" / name
        if path.is_file():
            if name != "task.json":
                return read_jsonl(path), str(path)
            task = read_json(path)
            splits = task.get("data") if isinstance(task, dict) else None
            splits = splits if isinstance(splits, dict) else {}
            split = next((s for s in ("train", "public_test", "test") if s in splits), None)
            if split is None:
                raise UsageError(f"{path}: no data.train, data.public_test or data.test in MERA's task.json")
            return splits[split], f"{path} ({split})"
    raise UsageError(f"no ruhumaneval data in {data_dir}: expected ruhumaneval/public_test.jsonl (MERA's format)")


def expected_outputs(record: dict) -> list[str]:
    """The flat list of expected outputs; the 2-D form (one identical row per sample) gives row 0."""
    outputs = record["outputs"]
    if outputs and isinstance(outputs[0], list):
        outputs = outputs[0]
    return [str(o) for o in outputs]


def test_cases(record: dict) -> list[dict]:
    return ast.literal_eval(record["inputs"]["tests"])


def check_record(record: Any, where: str) -> None:
    """A malformed record fails the load in one line, naming it."""
    try:
        function, entry = record["inputs"]["function"], record["meta"]["entry_point"]
        tests = test_cases(record)
        outputs = expected_outputs(record)
        record["instruction"].format(**record["inputs"])
    except (KeyError, TypeError, ValueError, SyntaxError, IndexError) as exc:
        raise UsageError(f"{where}: malformed ruHumanEval record ({type(exc).__name__}: {exc})") from None
    if not (isinstance(function, str) and isinstance(entry, str) and entry):
        raise UsageError(f"{where}: inputs.function and meta.entry_point must be strings")
    if not isinstance(tests, list) or not all(isinstance(t, dict) for t in tests):
        raise UsageError(f"{where}: inputs.tests must be the literal of a list of dicts")
    if not any(outputs):
        raise UsageError(f"{where}: no expected outputs (the test split, whose answers are hidden?)")
    if len(outputs) != len(tests):
        raise UsageError(f"{where}: {len(tests)} tests but {len(outputs)} expected outputs")


def prompt(record: dict) -> str:
    """MERA2's zero-shot query (MERA1 did not strip)."""
    return record["instruction"].format(**record["inputs"]).strip()


def load(options: LoadOptions) -> list[Problem]:
    records, source = _records(options)
    if not records:
        raise UsageError(f"{source}: no records")
    problems = []
    for i, record in enumerate(records):
        check_record(record, f"{source} record {i}")
        problems.append(Problem(f"ruHumanEval/{record['meta'].get('id', i)}", i, prompt(record), record))
    return problems


def unwrap_fence(generation: str) -> str:
    """MERA2's preprocess_generation: strip `XXXpython ... XXX`, X being the first character,
    unless that character is whitespace."""
    if generation and generation[0] not in (" ", "\n", "\t"):
        begin, end = generation[0] * 3 + "python", generation[0] * 3
        if generation.startswith(begin) and generation.endswith(end):
            return generation[len(begin):-len(end)]
    return generation


def postprocess(problem: Problem, continuation: str, extra_stops: tuple[str, ...] = ()) -> str:
    """The program MERA runs: inputs.function + the continuation cut at the first stop string
    (lm-eval's `until`), unwrapped from a code fence."""
    return problem.record["inputs"]["function"] + unwrap_fence(cut_at_stop(continuation, STOP_WORDS + extra_stops))


def reference_solution(problem: Problem) -> str:
    return problem.record["inputs"]["function"] + problem.record["meta"]["canonical_solution"]


def digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def compare(expected: list[str], results: Optional[list]) -> tuple[bool, tuple[int, ...]]:
    """MERA2's check_solution: fail on an empty or wrong-length result list, else pass iff
    `str(true[i]) == str(pred[i])` for every test (a None result compares as "None")."""
    if not results or len(results) != len(expected):
        return False, ()
    codes = []
    for want, got in zip(expected, results):
        if got is not None and not (isinstance(got, list) and got and isinstance(got[0], str)):
            return False, ()  # not the harness's line
        got_digest = digest("None") if got is None else got[0]
        codes.append(PASS if got_digest == digest(want) else RAISED if got is None else WRONG)
    return all(c == PASS for c in codes), tuple(codes)


def results_of(outcome: Outcome) -> Optional[list]:
    """The harness's result line (the last one: it writes after the program ran)."""
    reports = outcome.reports(lambda data: isinstance(data.get("results"), list))
    return reports[-1]["results"] if reports else None


@dataclass(frozen=True)
class OutputTests(Execution):
    """Each test's `str(result)` from one run of the harness, compared with the expected outputs."""

    mode: str = "fresh"  # "mera": MERA's exec without a globals dict
    exec_limit_s: float = EXEC_LIMIT_S  # seconds for exec(program), on the clock and in CPU time
    timeout_s: float = TIMEOUT_S  # seconds for the whole program, on the clock and in CPU time

    def build(self, problem: Problem, completion: str, prepared: Any = None) -> Program:
        job = {"mode": self.mode, "entry_point": problem.record["meta"]["entry_point"],
               "exec_limit_s": self.exec_limit_s}
        files = {"job.json": json.dumps(job).encode(), "tests.txt": problem.record["inputs"]["tests"].encode(),
                 "solution.py": completion.encode("utf-8", "surrogatepass")}
        return Program("", HARNESS, timeout_s=self.timeout_s, guard=True, files=files,
                       preimport=("numpy", "typing", "concurrent.futures", "tempfile", "platform"))

    def judge(self, problem: Problem, outcome: Outcome, prepared: Any = None) -> Verdict:
        if outcome.status == SANDBOX_ERROR:
            return Verdict(SANDBOX_ERROR, False, detail=outcome.detail)
        expected = expected_outputs(problem.record)
        results = results_of(outcome) if outcome.passed else None
        if results is None:  # MERA's "timed out": the child died or overran
            status = TIMEOUT if outcome.status == TIMEOUT else FAILED
            code = TIMED_OUT if status == TIMEOUT else RAISED
            return Verdict(status, False, (code,) * len(expected), detail=outcome.detail or "no result (timed out)")
        passed, codes = compare(expected, results)
        detail = "" if passed else f"{sum(c == PASS for c in codes)}/{len(expected)} outputs match" if codes else \
            f"{len(results)} results for {len(expected)} tests"
        return Verdict(PASSED if passed else FAILED, passed, codes, detail=detail)


def chat_parts(problem: Problem) -> tuple[str, str]:
    """For chat and instruction models: MERA's query as the instruction, the answer pre-filled
    with a code fence and `inputs.function` (the continuation is the body, as without chat)."""
    return problem.prompt, "```python\n" + problem.record["inputs"]["function"]


def make(name: str) -> TaskSpec:
    compat = name == "ruhumaneval-mera-compat"
    how = ("MERA's executor (exec without globals: top-level imports, helpers and recursion unseen)" if compat
           else "the program run as a module")
    return TaskSpec(
        name=name, family="ruhumaneval", load=load, stop_words=STOP_WORDS, postprocess=postprocess,
        reference_solution=reference_solution, execution=OutputTests("mera" if compat else "fresh"),
        metrics=(PassAtK(default_ks=KS),), prompting=Prompting(instruction=chat_parts), hf_dataset=HF_DATASET,
        description=f"ruHumanEval (MERA), outputs per test; {how}; pass@1/5/10 (MERA draws 10 samples)",
    )


TASK_NAMES = ["ruhumaneval", "ruhumaneval-mera-compat"]
