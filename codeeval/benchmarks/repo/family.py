"""Repository-level benchmarks: EvoCodeBench (ECB) and DevEval (DEV), ../shared/notes/benchmarks.md §9-10.

Tasks: `evocodebench` (setting baseline), `deveval` (without_context, the same template) and
`<family>-local_completion`, `<family>-local_infilling`. A problem's prompt is what the
references feed open models (raw `input_code`, context above first for local_completion);
chat models get the ChatLM template (Prompting.instruction) and FIM models the
above/below parts (Prompting.fim_parts). Post-processing is process_completion.py's `lm` rule
for raw continuations and its `gpt` rule for chat answers (codeeval/benchmarks/repo/post.py); the
execution patches the body into the repository and runs its tests (codeeval/benchmarks/repo/execution.py).

Only problems whose project is present under the Source_Code root are loaded; the number
skipped travels in each problem's `RepoContext` and is reported by the metric; where the
repository is on this host is its `RepoSite`, left out of every cache key.
"""
from __future__ import annotations

import textwrap
from pathlib import Path

from codeeval.benchmarks.repo import post as repo_post
from codeeval.benchmarks.repo.deps import DependencyRecall
from codeeval.benchmarks.repo.execution import RepoExecution, RepoPassAtK, ground_truth
from codeeval.benchmarks.repo.sources import (
    dependency_root_setting,
    project_root,
    read_data,
    read_prompt_elements,
    source_root_setting,
)
from codeeval.benchmarks.repo.truncate import truncate_elements
from codeeval.benchmarks.spec import LoadOptions, Problem, Prompting, RepoContext, RepoSite, TaskSpec
from codeeval.core.errors import UsageError
from codeeval.executors.repo.jobs import recover_project

SETTINGS = {"evocodebench": ("baseline", "local_completion", "local_infilling", "baseline_lm_compat"),
            "deveval": ("without_context", "local_completion", "local_infilling")}

# the ks the papers report: DevEval's leaderboard pass/recall@1,3,5,10; EvoCodeBench's @1 and @10
KS = {"deveval": (1, 3, 5, 10), "evocodebench": (1, 10)}

# LM_inference.py's baseline lacks the f-string braces and feeds open models this literal line
# for methods; `baseline_lm_compat` reproduces the released open-model prompts with it.
LM_BUG_CLASS_LINE = "class js['class_name']:\n"

BASELINE = ("Please complete the {function_name} function in the given Python code.\n\nInput Code:\n```Python\n"
            "{input_code}\n```\n\nCompleted Code:")
LOCAL_COMPLETION = ("Please complete the {function_name} function based on the contexts above the function.\n\n"
                    "The contexts above the function are:\n```Python\n{contexts_above}\n```\n\n"
                    "The code to be completed is:\n```Python\n{input_code}\n```\n\nCompleted code:")
LOCAL_INFILLING = ("Please complete the {function_name} function in the middle of a file.\n\n"
                   "The contexts above the function are:\n```Python\n{contexts_above}\n```\n\n"
                   "The contexts below the function are:\n```Python\n{contexts_below}\n```\n\n"
                   "The code to be completed is:\n```Python\n{input_code}\n```\n\nCompleted code:")


def project_of(family: str, record: dict) -> str:
    """DevEval's project_path; EvoCodeBench's first component of completion_path."""
    if family == "deveval":
        return record["project_path"]
    return record["completion_path"].split("/")[0]


def deveval_input_code(record: dict, source_file: Path) -> str:
    """The rule that rebuilds all 1825 released DevEval prompts (notes §10.2)."""
    lines = source_file.read_text(encoding="utf-8").splitlines(keepends=True)
    start, end = record["signature_position"]
    head = f"class {record['namespace'].split('.')[-2]}:\n" if record["type"] == "method" else ""
    req = record["requirement"]
    doc = '"""\n' + req["Functionality"] + "\nInput-Output Arguments\n" + req["Arguments"] + '\n"""'
    return head + "".join(lines[start - 1:end]) + "\n\n" + textwrap.indent(doc, " " * record["indent"])


def _elements(family: str, setting: str, record: dict, source_file: Path, elements: dict) -> dict:
    """function_name, input_code (with the class line for chat prompts), contexts above/below."""
    name = record["namespace"].split(".")[-1]
    if family == "deveval" and setting == "without_context":
        return {"function_name": name, "input_code": deveval_input_code(record, source_file),
                "contexts_above": "", "contexts_below": ""}
    el = elements.get(record["namespace"])
    if el is None:
        raise UsageError(f"{family}: no prompt elements for {record['namespace']}")
    code = el["input_code"]
    if el.get("class_name") and setting in ("baseline", "baseline_lm_compat"):
        code = f"class {el['class_name']}:\n" + code
    return {"function_name": el.get("function_name", name), "input_code": code,
            "contexts_above": el.get("contexts_above", ""), "contexts_below": el.get("contexts_below", ""),
            "raw_input_code": el["input_code"], "class_name": el.get("class_name") or ""}


def open_model_prompt(setting: str, el: dict) -> str:
    """The text LM_inference.py tokenizes after the bos id; chat prompts keep the class name."""
    if setting == "local_completion":
        return el["contexts_above"] + el["input_code"]
    if setting == "baseline_lm_compat" and el.get("class_name"):
        return LM_BUG_CLASS_LINE + el["raw_input_code"]
    return el["input_code"]


def _loader(family: str, setting: str):
    def load(options: LoadOptions) -> list[Problem]:
        rows = read_data(family, options.data_dir)
        root = source_root_setting(family, options.data_dir, options.source_code_root)
        if root is None:
            raise UsageError(f"{family}: no Source_Code tree (set CODEEVAL_{family.upper()}_SOURCE_CODE or put "
                             f"{family}/Source_Code in --data-dir)")
        local = setting not in ("baseline", "without_context") or family == "evocodebench"
        elements = read_prompt_elements(family, options.data_dir, setting) if local else {}
        dep_root = dependency_root_setting(family, options.data_dir, options.dependency_data_root)
        roots: dict[str, object] = {}
        covered = []
        for record in rows:
            project = project_of(family, record)
            if project not in roots:
                roots[project] = project_root(root, project)
                if roots[project] is not None:
                    recover_project(roots[project], project)
            if roots[project] is not None:
                covered.append((record, roots[project]))
        if not covered:
            raise UsageError(f"{family}: none of the {len(rows)} tasks' projects is under {root}")
        skipped = len(rows) - len(covered)
        # grouped by project (first appearance order): an execution shard holds one repository
        first = {}
        for record, _ in covered:
            first.setdefault(project_of(family, record), len(first))
        covered.sort(key=lambda c: first[project_of(family, c[0])])
        problems = []
        for i, (record, src) in enumerate(covered):
            el = _elements(family, setting, record, Path(src) / record["completion_path"], elements)
            prompt = open_model_prompt(setting, el)
            repo = RepoContext(project=project_of(family, record), setting=setting, elements=el, skipped=skipped,
                               total=len(rows), exclude_failing_oracles=options.exclude_failing_oracles)
            site = RepoSite(source_root=str(src), dependency_data_root=str(dep_root) if dep_root else None)
            problems.append(Problem(record["namespace"], i, prompt, record, repo=repo, site=site))
        return problems

    return load


def chat_prompt(setting: str, el: dict) -> str:
    """make_prompt.py: the ChatLM template, contexts cut to the gpt-4 token budget (truncate.py)."""
    template = {"local_completion": LOCAL_COMPLETION, "local_infilling": LOCAL_INFILLING}.get(setting, BASELINE)
    return template.format(**truncate_elements(setting, el, lambda e: template.format(**e)))


def _instruction(problem: Problem) -> tuple[str, str]:
    return chat_prompt(problem.repo.setting, problem.repo.elements), ""


def _fim_parts(problem: Problem) -> tuple[str, str]:
    el = problem.repo.elements
    return el["contexts_above"] + el["input_code"], el["contexts_below"]


def postprocess(problem: Problem, continuation: str, extra_stops: tuple[str, ...] = ()) -> str:
    """A fenced or whole-function answer (a chat model) takes the `gpt` rule, a bare body the `lm`
    rule; eos texts are cut first (the references' vLLM output has none)."""
    for stop in extra_stops:
        if stop and stop in continuation:
            continuation = continuation[:continuation.index(stop)]
    name = problem.task_id.split(".")[-1]
    if "```" in continuation or f"def {name}(" in continuation:
        return repo_post.extract_gpt(continuation, problem.task_id)
    return repo_post.extract_lm(continuation)


def make(name: str) -> TaskSpec:
    family, _, setting = name.partition("-")
    setting = setting or SETTINGS[family][0]
    if setting not in SETTINGS[family]:
        raise UsageError(f"unknown {family} setting {setting!r}; choose from {', '.join(SETTINGS[family])}")
    return TaskSpec(
        name=name, family=family, load=_loader(family, setting), stop_words=(),
        postprocess=postprocess, reference_solution=ground_truth,
        metrics=(RepoPassAtK(default_ks=KS[family]), DependencyRecall(default_ks=KS[family])), execution=RepoExecution(mode=family),
        prompting=Prompting(instruction=_instruction,
                            fim_parts=_fim_parts if setting == "local_infilling" else None),
        description=f"{family} ({setting}): completions patched into the repository, its tests run",
    )


TASK_NAMES = [f"{family}{'' if i == 0 else '-' + s}" for family, settings in SETTINGS.items()
              for i, s in enumerate(settings)]
