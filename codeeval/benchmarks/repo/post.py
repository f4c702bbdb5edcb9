"""EvoCodeBench/DevEval post-processing (`prompt/process_completion.py`): model output -> function body.

- `lm` (open models, raw continuations): strip U+0407 then newlines at both ends; keep lines
  while their indent is at least the first line's (or they are blank); stop at the first
  shallower line.
- `gpt` (chat models): the first fenced block (or everything); without `def <name>(` the `lm`
  rule; with it, the body of the first function of that name (depth first), after its
  docstring, every import statement of the snippet prepended at the body's indent (so they end
  up in reverse order, only the first line of a multi-line import indented); "    pass\\n" when
  nothing is found. The reference parses with tree-sitter; we use Python's `ast`, which agrees on
  code that parses and gives "    pass\\n" on code that does not (docs/repo-level.md).
"""
from __future__ import annotations

import ast
import textwrap

EMPTY = "    pass\n"


def count_indent(line: str) -> int:
    return len(line) - len(textwrap.dedent(line))


def _keep_indented(lines: list[str]) -> str:
    indent = count_indent(lines[0])
    kept = []
    for line in lines:
        if count_indent(line) >= indent or line.strip() == "":
            kept.append(line)
        else:
            break
    return "\n".join(kept)


def extract_lm(completion: str) -> str:
    return _keep_indented(completion.strip("\u0407").strip("\n").split("\n"))


def fenced_code(completion: str) -> str:
    lines = completion.split("\n")
    start = end = None
    for i, line in enumerate(lines):
        if line.startswith("```"):
            if start is None:
                start = i + 1
            else:
                end = i
                break
    if start is None:
        start = 0
    if end is None:
        end = len(lines)
    return "\n".join(lines[start:end])


def _find_function(node: ast.AST, name: str):
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) and child.name == name:
            return child
        found = _find_function(child, name)
        if found is not None:
            return found
    return None


def _imports(node: ast.AST) -> list[ast.stmt]:
    found = []
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.Import, ast.ImportFrom)):
            found.append(child)
        found.extend(_imports(child))
    return found


def function_body(code: str, name: str):
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return None
    func = _find_function(tree, name)
    if func is None or not func.body:
        return None
    first = func.body[0]
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
        start = first.end_lineno  # the line after the docstring (0-based index)
    else:
        start = first.lineno - 1
    end = func.body[-1].end_lineno
    lines = code.split("\n")
    body = lines[start:end]
    if not body:
        return None
    imports = _imports(tree)
    if imports:
        indent = next((count_indent(ln) for ln in body if ln.strip()), 0)
        for node in imports:
            body = [" " * indent + "\n".join(lines[node.lineno - 1:node.end_lineno])] + body
    return "\n".join(body)


def extract_gpt(completion: str, namespace: str) -> str:
    name = namespace.split(".")[-1]
    code = fenced_code(completion)
    if f"def {name}(" not in code:
        return _keep_indented(code.strip("\n").split("\n"))
    body = function_body(code, name)
    return EMPTY if body is None else body


def first_per_namespace(rows: list[dict]) -> dict[str, dict]:
    """The reference keeps only the first raw line of each namespace (`del benchmark[ns]`)."""
    out: dict[str, dict] = {}
    for row in rows:
        out.setdefault(row["namespace"], row)
    return out
