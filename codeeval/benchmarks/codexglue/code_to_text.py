"""CodeXGLUE code-to-text (docstring generation) as bigcode-evaluation-harness runs it:
`codexglue_code_to_text-<language>` and `codexglue_code_to_text-python-left`.

The prompt is the function without its docstring followed by "The goal of this function is
to:" in a comment (`-left`: only the signature, up to an opening triple quote); the
completion is the first line the model writes. Scored by CodeXGLUE's smoothed sentence BLEU
against the detokenized `docstring_tokens` (codeeval/benchmarks/codexglue/bleu.py, codeeval/benchmarks/codexglue/moses.py).

bigcode drops the first character of every reference that starts with "r" (meant for r\"\"\"
docstrings, it turns "returns ..." into "eturns ..."). The plain names keep the reference
whole; the `-rbug` names (`codexglue_code_to_text-python-rbug`, ...) reproduce bigcode's
numbers. The choice is part of the task's name, so a result never hides which one it used.
"""
from __future__ import annotations

import re
from functools import partial

from codeeval.benchmarks.codexglue import moses
from codeeval.benchmarks.codexglue.bleu import CodeXGlueBleu
from codeeval.benchmarks.data import check_fields, find_local, load_hf, read_jsonl
from codeeval.benchmarks.spec import LoadOptions, Problem, Prompting, TaskSpec
from codeeval.core.errors import UsageError

HF_DATASET = "code_x_glue_ct_code_to_text"
LANGUAGES = ("python", "go", "ruby", "java", "javascript", "php")
SIZES = {"python": 14918, "go": 8122, "ruby": 1261, "java": 10955, "javascript": 3291, "php": 14014}
FIELDS = {"code": str, "docstring": str, "docstring_tokens": list}  # what the task reads (data.check_fields)
TRIPLE_QUOTE, SINGLE_TRIPLE_QUOTE = '"""', "'''"
SUFFIX = {"python": '\n""" The goal of this function is to:\n', "ruby": "\n=begin The goal of this function is to:\n"}
OTHER_SUFFIX = "\n/* The goal of this function is to:\n"
_LONE_SINGLE = re.compile(r'[^\'"][\']\s*$')
_LONE_DOUBLE = re.compile(r'[^\'"]["]\s*$')


def docstring_at(record: dict) -> int:
    """Where the docstring starts in `code` (bigcode's `code.index(docstring)`)."""
    at = record["code"].find(record["docstring"])
    if at < 0:
        raise UsageError(f"code-to-text record {record.get('id', '?')}: its docstring is not part of its code")
    return at


def standardize_docstring_prompt(prefix: str) -> str:
    """InCoder's normalisation, as bigcode copies it: cut at the first triple quote, drop a
    trailing lone quote (with the character before it), end with a triple double quote."""
    for delim in (TRIPLE_QUOTE, SINGLE_TRIPLE_QUOTE):
        if delim in prefix:
            prefix = prefix[:prefix.index(delim)]
            break
    for lone in (_LONE_SINGLE, _LONE_DOUBLE):
        match = lone.search(prefix)
        if match:
            prefix = prefix[:match.start()]
    return prefix + TRIPLE_QUOTE


def python_prompt(record: dict) -> str:
    code, at = record["code"], docstring_at(record)
    prefix = standardize_docstring_prompt(code[:at])
    suffix = code[at + len(record["docstring"]):].replace(TRIPLE_QUOTE, "").replace(SINGLE_TRIPLE_QUOTE, "")
    prefix = prefix.strip().removesuffix(TRIPLE_QUOTE)
    prefix = prefix.strip().removesuffix(SINGLE_TRIPLE_QUOTE)
    return prefix + suffix + SUFFIX["python"]


def left_prompt(record: dict) -> str:
    return standardize_docstring_prompt(record["code"][:docstring_at(record)])


def prompt(language: str, record: dict) -> str:
    if language == "python":
        return python_prompt(record)
    return record["code"] + SUFFIX.get(language, OTHER_SUFFIX)


def postprocess(language: str, problem: Problem, continuation: str, extra_stops: tuple[str, ...] = ()) -> str:
    """bigcode's: the first line after the prompt's closing comment opener, stripped first."""
    return (problem.prompt + continuation).split(SUFFIX.get(language, OTHER_SUFFIX))[1].strip().split("\n")[0]


def postprocess_left(problem: Problem, continuation: str, extra_stops: tuple[str, ...] = ()) -> str:
    """bigcode's LeftCodeToText: the first line after the first triple quote (of either kind,
    double first), cut at that quote's closing twin."""
    generation = problem.prompt + continuation
    output = generation.strip().split("\n")[0].strip()
    for delim in (TRIPLE_QUOTE, SINGLE_TRIPLE_QUOTE):
        if delim in generation:
            generation = generation[generation.index(delim) + 3:]
            output = generation.strip().split("\n")[0].strip()
            output = output.split(delim, 1)[0]
    return output


def reference(problem: Problem, drop_leading_r: bool = False) -> str:
    """The detokenized `docstring_tokens` (bigcode's get_reference). `drop_leading_r` is
    bigcode's bug; an empty docstring gives "" where bigcode raises IndexError."""
    docstring = " ".join(problem.record["docstring_tokens"]).replace("\n", "")
    if drop_leading_r and docstring[:1] == "r":
        docstring = docstring[1:]
    return moses.detokenize(docstring.strip().split())


def _loader(language: str, left: bool):
    build = left_prompt if left else partial(prompt, language)

    def load(options: LoadOptions) -> list[Problem]:
        if options.data_dir is not None:
            folder = "codexglue_code_to_text"
            path = find_local(options.data_dir, folder, [f"{language}/test.jsonl", f"{language}/test.jsonl.gz"])
            records, where = read_jsonl(path), f"data file {path}"
        else:
            records, where = load_hf(HF_DATASET, "test", language,
                                     local_hint=f"codexglue_code_to_text/{language}/test.jsonl"), f"HF dataset {HF_DATASET}"
        check_fields(records, FIELDS, where)
        if not all(isinstance(t, str) for r in records for t in r["docstring_tokens"]):
            raise UsageError(f"malformed {where}: docstring_tokens must be lists of strings")
        return [Problem(f"{language}/{i}", i, build(r), r) for i, r in enumerate(records)]

    return load


def make(name: str) -> TaskSpec:
    parts = name.split("-")[1:]  # codexglue_code_to_text-<language>[-left][-rbug]
    language, left, rbug = parts[0], "left" in parts, "rbug" in parts
    ref = partial(reference, drop_leading_r=rbug)
    return TaskSpec(
        name=name, family="code_to_text", load=_loader(language, left),
        stop_words=(SINGLE_TRIPLE_QUOTE, TRIPLE_QUOTE) if language == "python" else ("\n",),
        postprocess=postprocess_left if left else partial(postprocess, language),
        reference_solution=ref, metrics=(CodeXGlueBleu(ref),), prompting=Prompting(language=language),
        hf_dataset=HF_DATASET,
        description=f"CodeXGLUE code-to-text {language} test ({SIZES[language]} functions)"
                    + (", signature-only prompt" if left else "") + ", smoothed BLEU"
                    + (", reference with bigcode's leading-'r' drop" if rbug else ""),
    )


TASK_NAMES = [f"codexglue_code_to_text-{lang}{variant}{bug}" for lang in LANGUAGES
              for variant in (("", "-left") if lang == "python" else ("",)) for bug in ("", "-rbug")]
