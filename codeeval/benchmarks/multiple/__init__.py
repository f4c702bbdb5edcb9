"""MultiPL-E (HumanEval and MBPP translated to 21 languages) as bigcode-evaluation-harness runs it.

Tasks: `multiple-<lang>` (HumanEval, the `reworded` prompts: the HF config `humaneval-<lang>`
bigcode loads), `multiple-<lang>-{keep,remove,reworded,transform}`, and `multiple-mbpp-<lang>`
(`-keep`). Prompt: `prompt.strip()`; stop words: the records' `stop_tokens` (the same in every
record of a file; bigcode takes the first row's) + `<file_sep>`; completion: prompt + the
continuation cut at the first stop word; program: completion + "\\n" + tests, compiled and run by
the language's runner (codeeval/benchmarks/multiple/languages.py) in the `multiple-<lang>` image. A
sample passes iff MultiPL-E's status is OK with exit code 0; pass@k per problem, mean over
problems (only k <= samples). MultiPL-E has no canonical solutions: the `reference` backend
gets the bare prompt, which fails.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from codeeval.benchmarks.data import check_record, find_local, load_hf, read_jsonl
from codeeval.benchmarks.metrics import PassAtK
from codeeval.benchmarks.multiple.languages import LANGUAGES, UNAVAILABLE
from codeeval.benchmarks.spec import Execution, LoadOptions, Problem, TaskSpec, Verdict, dataset_prompt
from codeeval.benchmarks.text import prompt_plus_cut
from codeeval.core.errors import UsageError
from codeeval.executors.base import Outcome, Program

HF_DATASET = "nuprl/MultiPL-E"
LANGS = tuple(sorted([*LANGUAGES, *UNAVAILABLE]))
HUMANEVAL_VARIANTS = ("keep", "remove", "reworded", "transform")
MBPP_VARIANTS = ("keep", "reworded")
# The `stop_tokens` of every record of each language (checked at load: a file that disagrees is refused).
STOP_TOKENS = {
    "cpp": ("\n}",), "cs": ("\n    }\n",), "d": ("\n\n", "\nvoid", "\nbool", "\nint"),
    "elixir": ("\ndefmodule", "\ndefp", "\ndef ", "\n#", "\n\n"), "go": ("\nfunc", "struct", "\n// "),
    "hs": ("\n\n", "\n{-", "\n-- |", "\n--", "\ntype", "\ndata", "\nnewtype"), "java": ("\n    }\n",),
    "jl": ("\nfunction", "\nmacro", "\n\n"), "js": ("\nfunction ", "\n/*", "\n//", "\nconsole.log"),
    "lua": ("\nlocal", "\nfunction", "\n--", "\n\n"), "ml": ("\n\n", "\n(*", "\ntype", "\nlet"),
    "php": ("\nfunction", "\n?>", "\n//", "\n#"), "pl": ("\nsub", "\n#", "\n\n"),
    "py": ("\ndef", "\n#", "\nif", "\nclass"), "r": ("\n#", "\n```"), "rb": ("\nclass", "\ndef", "\n#", "\n\n"),
    "rkt": ("\n(define ", "\n#|", "\n;", "\n("), "rs": ("\n}",), "scala": ("\n    }\n",), "sh": ("\n}",),
    "swift": ("\n}",), "ts": ("\nfunction ", "\n/*", "\n//", "\nclass"),
}


@dataclass(frozen=True)
class Source:
    dataset: str  # humaneval | mbpp
    lang: str
    variant: str

    @property
    def file(self) -> str:
        return f"{self.dataset}-{self.lang}-{self.variant}.jsonl.gz"

    @property
    def hf_config(self) -> str:
        """The HF config: `reworded` is the unsuffixed one (bigcode's `humaneval-<lang>`)."""
        return f"{self.dataset}-{self.lang}" + ("" if self.variant == "reworded" else f"-{self.variant}")


def load_records(source: Source, options: LoadOptions) -> list[dict]:
    if options.data_dir is not None:
        return read_jsonl(find_local(options.data_dir, "multipl_e", [f"prompts/{source.file}", source.file]))
    return load_hf(HF_DATASET, "test", source.hf_config, local_hint=f"multipl_e/prompts/{source.file}")


def _loader(source: Source):
    def load(options: LoadOptions) -> list[Problem]:
        records = load_records(source, options)
        if not records:
            raise UsageError(f"MultiPL-E {source.file}: no records")
        problems = []
        for i, r in enumerate(records):
            missing = [k for k in ("name", "prompt", "tests", "stop_tokens") if k not in r]
            if missing:
                raise UsageError(f"MultiPL-E {source.file} record {i}: missing {', '.join(missing)}")
            check_record(r, {"name": str, "prompt": str, "tests": str, "stop_tokens": list},
                         f"MultiPL-E {source.file} record {i}")
            if tuple(r["stop_tokens"]) != STOP_TOKENS[source.lang]:
                raise UsageError(f"MultiPL-E {source.file} record {i} ({r['name']}): stop tokens "
                                 f"{r['stop_tokens']!r} differ from {list(STOP_TOKENS[source.lang])!r}")
            problems.append(Problem(r["name"], i, r["prompt"].strip(), r))
        return problems

    return load


def program_text(problem: Problem, completion: str) -> str:
    """bigcode's cached_eval_script: the completion (prompt included) + "\\n" + tests."""
    return completion + "\n" + problem.record["tests"]


@dataclass(frozen=True)
class MultiplETests(Execution):
    """Compile and run the program in the language's image; MultiPL-E's status rules judge it."""

    lang: str

    @property
    def runtime(self) -> str:  # type: ignore[override]
        return f"multiple-{self.lang}"

    def build(self, problem: Problem, completion: str, prepared: Any = None) -> Program:
        return LANGUAGES[self.lang].program(program_text(problem, completion))

    def judge(self, problem: Problem, outcome: Outcome, prepared: Any = None) -> Verdict:
        """`status` is MultiPL-E's word (OK, Exception, SyntaxError, AssertionError, Timeout, ...;
        the sandbox's own sandbox_error), as in its results files."""
        result = LANGUAGES[self.lang].result(outcome)
        detail = f"MultiPL-E status {result.status}, exit code {result.exit_code}"
        if outcome.detail:
            detail += f"; {outcome.detail}"
        return Verdict(result.status, result.passed, detail=detail)

    def exit_code(self, outcome: Outcome) -> Optional[int]:
        """The last step's (the compiler's when it failed, as MultiPL-E records it); None on a timeout."""
        return LANGUAGES[self.lang].result(outcome).exit_code


def make(name: str) -> TaskSpec:
    source = parse(name)
    stops = STOP_TOKENS[source.lang] + ("<file_sep>",)

    def postprocess(problem: Problem, continuation: str, extra: tuple[str, ...] = ()) -> str:
        return prompt_plus_cut(problem.prompt, continuation, stops + extra)

    return TaskSpec(
        name=name, family="multiple", load=_loader(source), stop_words=stops, postprocess=postprocess,
        reference_solution=lambda p: p.prompt, execution=MultiplETests(source.lang),
        metrics=(PassAtK(),), hf_dataset=HF_DATASET,
        completion_prefix=dataset_prompt,  # MultiPL-E's evaluator: prompt + completion + tests
        description=f"MultiPL-E {source.dataset} in {source.lang} ({source.variant} prompts)",
    )


def parse(name: str) -> Source:
    parts = name.split("-")[1:]
    dataset = "mbpp" if parts[:1] == ["mbpp"] else "humaneval"
    parts = parts[1:] if dataset == "mbpp" else parts
    lang, variant = parts[0], (parts[1] if len(parts) > 1 else "reworded")
    return Source(dataset, lang, variant)


TASK_NAMES = [
    *(f"multiple-{lang}{suffix}" for lang in LANGS for suffix in ["", *(f"-{v}" for v in HUMANEVAL_VARIANTS)]),
    *(f"multiple-mbpp-{lang}{suffix}" for lang in LANGS
      for suffix in ["", *(f"-{v}" for v in MBPP_VARIANTS)]),
]
