"""EvoCodeBench/DevEval prompt details: LM_inference.py's baseline bug (`baseline_lm_compat`) and
make_prompt.py's gpt-4 token truncation of long contexts (tiktoken cl100k_base, offline)."""
from __future__ import annotations

import json
from pathlib import Path

from repo_fixtures import write_data, write_mini_tree

from codeeval.benchmarks.registry import TASKS
from codeeval.benchmarks.repo.family import make
from codeeval.benchmarks.repo.truncate import CL100K_SHA256, gpt4_encoding
from codeeval.benchmarks.spec import LoadOptions


def _ecb_tree(tmp_path: Path, monkeypatch, above: str = "import time\n", below: str = "") -> LoadOptions:
    """An EvoCodeBench layout (Source_Code/<project>) with prompt elements in the upstream format."""
    root = tmp_path / "Source_Code"
    records = write_mini_tree(tmp_path / "topics")
    (tmp_path / "topics" / "Utilities").rename(root)
    recs = []
    for r in records[:2]:
        r = {k: v for k, v in r.items() if k != "project_path"}
        r["completion_path"] = r["completion_path"].removeprefix("Utilities/")
        recs.append(r)
    write_data(tmp_path / "data", "evocodebench", recs)
    elements = [
        {"namespace": "mini.util.clamp", "function_name": "clamp", "class_name": "",
         "input_code": "def clamp(x, lo_, hi):\n    \"\"\"Clamp.\"\"\"\n", "contexts_above": above,
         "contexts_below": below},
        {"namespace": "mini.util.Box.area", "function_name": "area", "class_name": "Box",
         "input_code": "    def area(self):\n", "contexts_above": "class Box:\n", "contexts_below": "\nX = 1\n"},
    ]
    (tmp_path / "data/evocodebench/prompt_elements.jsonl").write_text("".join(json.dumps(e) + "\n" for e in elements))
    monkeypatch.setenv("CODEEVAL_EVOCODEBENCH_SOURCE_CODE", str(root))
    return LoadOptions(tmp_path / "data")


def test_baseline_lm_compat_reproduces_the_literal_class_line(tmp_path, monkeypatch):
    options = _ecb_tree(tmp_path, monkeypatch)
    assert "evocodebench-baseline_lm_compat" in TASKS
    fixed = {p.task_id: p for p in make("evocodebench").load(options)}
    compat_task = make("evocodebench-baseline_lm_compat")
    compat = {p.task_id: p for p in compat_task.load(options)}
    # methods: LM_inference.py's `f"class js['class_name']:\n{input_code}"` lacks the inner braces
    assert compat["mini.util.Box.area"].prompt == "class js['class_name']:\n    def area(self):\n"
    assert fixed["mini.util.Box.area"].prompt == "class Box:\n    def area(self):\n"
    # functions (empty class_name) are untouched by the bug
    assert compat["mini.util.clamp"].prompt == fixed["mini.util.clamp"].prompt == \
        "def clamp(x, lo_, hi):\n    \"\"\"Clamp.\"\"\"\n"
    # chat prompts come from make_prompt.py, which has the braces: identical in both modes
    for tid, p in compat.items():
        assert compat_task.prompting.instruction(p) == make("evocodebench").prompting.instruction(fixed[tid])
    assert "class Box:\n    def area(self):\n" in compat_task.prompting.instruction(compat["mini.util.Box.area"])[0]
    assert compat_task.prompting.fim_parts is None


def _lines(a: int, b: int) -> str:
    return "".join(f"value_{i} = compute({i}, 'item-{i}')\n" for i in range(a, b))


def _block(text: str, head: str) -> str:
    """The fenced code after `head` in a chat prompt."""
    start = text.index(head + "\n```Python\n") + len(head) + len("\n```Python\n")
    return text[start:text.index("\n```", start)]


def test_offline_cl100k_is_the_upstream_encoding():
    enc = gpt4_encoding()
    assert enc.n_vocab == 100277 and enc.encode("hello world") == [15339, 1917]  # cl100k_base ids
    assert CL100K_SHA256.startswith("223921b7")  # tiktoken's own expected hash for cl100k_base


def test_local_completion_keeps_the_last_budget_tokens_of_the_context_above(tmp_path, monkeypatch):
    enc = gpt4_encoding()
    above = _lines(0, 3000)
    assert len(enc.encode(above)) > 20000
    options = _ecb_tree(tmp_path, monkeypatch, above=above)
    task = make("evocodebench-local_completion")
    problem = next(p for p in task.load(options) if p.task_id == "mini.util.clamp")
    text = task.prompting.instruction(problem)[0]
    kept = _block(text, "The contexts above the function are:")
    budget = 16384 - len(enc.encode("def clamp(x, lo_, hi):\n    \"\"\"Clamp.\"\"\"\n")) - 500
    assert kept == enc.decode(enc.encode(above)[-budget:]) and above.endswith(kept) and len(kept) < len(above)
    assert abs(len(enc.encode(kept)) - budget) <= 1
    # short contexts are left alone (and the open-model prompt is never cut)
    assert problem.prompt == above + "def clamp(x, lo_, hi):\n    \"\"\"Clamp.\"\"\"\n"
    box = next(p for p in task.load(options) if p.task_id == "mini.util.Box.area")
    assert _block(task.prompting.instruction(box)[0], "The contexts above the function are:") == "class Box:\n"


def test_local_infilling_splits_the_budget_pro_rata_only_past_the_window(tmp_path, monkeypatch):
    enc = gpt4_encoding()
    code = "def clamp(x, lo_, hi):\n    \"\"\"Clamp.\"\"\"\n"
    budget = 16384 - len(enc.encode(code)) - 500
    above, below = _lines(0, 3000), _lines(5000, 6000)
    options = _ecb_tree(tmp_path, monkeypatch, above=above, below=below)
    task = make("evocodebench-local_infilling")
    problem = next(p for p in task.load(options) if p.task_id == "mini.util.clamp")
    text = task.prompting.instruction(problem)[0]
    a, b = len(enc.encode(above)), len(enc.encode(below))
    keep_a, keep_b = int(budget * (a / (a + b))), int(budget * (b / (a + b)))
    got_above = _block(text, "The contexts above the function are:")
    got_below = _block(text, "The contexts below the function are:")
    assert got_above == enc.decode(enc.encode(above)[-keep_a:]) and above.endswith(got_above)
    assert got_below == enc.decode(enc.encode(below)[:keep_b]) and below.startswith(got_below)
    assert keep_a + keep_b <= budget < a + b
    # over the budget but the whole prompt within 16384 tokens: make_prompt.py does not cut
    small_above = _lines(0, 900)
    while (size := len(enc.encode(small_above + below[:2000]))) <= budget:
        small_above += "x = 1\n" * ((budget - size) // 8 + 1)
    options = _ecb_tree(tmp_path / "b", monkeypatch, above=small_above, below=below[:2000])
    problem = next(p for p in task.load(options) if p.task_id == "mini.util.clamp")
    text = task.prompting.instruction(problem)[0]
    assert len(enc.encode(small_above + below[:2000])) > budget and len(enc.encode(text)) <= 16384
    assert _block(text, "The contexts above the function are:") == small_above
