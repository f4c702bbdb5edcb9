"""The layout is the architecture (docs/architecture.md): import paths equal file paths, and
imports point down the layers only, with no circle, not even inside a function.

    app (codeeval/*.py: cli, preflight, image_builds, prefect_api, prefect_compat)
    flows/      Prefect flows
    tasks/      Prefect tasks (the only other Prefect code)
    reporting/  what runs say: summary, compare, the nightly leaderboard and its page
    pipeline/   the stages' logic: plan, generate, execute, score, publish, failures
    training/   fine-tuning a classifier (the classification tasks' train and predict stages)
    generation/ backends
    benchmarks/ families, their metrics
    executors/  sandboxes, runners, the repository patcher
    core/       errors, contracts, results, files, artifacts, storage, cache, fingerprint
"""
from __future__ import annotations

import ast
import importlib.util
import re
import sys
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "codeeval"
LAYERS = ("core", "executors", "benchmarks", "generation", "training", "pipeline", "reporting", "tasks", "flows", "app")
ORCHESTRATION = ("tasks", "flows", "app")  # where Prefect may be imported
# In generation/, torch is imported only by the transformers backend's folder and the vLLM backend, so
# that prompts, the API backend, replay and the model sources run where torch is not installed.
# (transformers is not in the rule: models/smollm2.py writes the HF directory with it, and training/ uses it.)
TORCH_IN_GENERATION = ("codeeval.generation.hf", "codeeval.generation.vllm_backend")
# Files copied into sandboxes (a family's harness, the sandbox server: executors/docker/inside/, copied flat
# into the images' /opt/codeeval, where they import each other by their bare names), image recipes.
NOT_MODULES = ("harness", "inside", "containers")
IN_IMAGE = ("codeeval/executors/runner",)  # copied into the images too, where `cputime` is a top-level module


def modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(REPO).with_suffix("")
        if any(part in NOT_MODULES for part in rel.parts) or rel.as_posix() in IN_IMAGE:
            continue  # the sandbox server and runner run inside the image, stdlib only
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 2 or (len(parts) == 2 and parts[1] in LAYERS) else "app"


def imports(path: Path) -> list[tuple[int, str]]:
    """Every absolute import of the file, wherever it sits (module level, function, TYPE_CHECKING)."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out += [(node.lineno, f"{node.module}.{a.name}") for a in node.names] + [(node.lineno, node.module)]
        elif isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
    return out


def graph() -> dict[str, set[str]]:
    mods, edges = modules(), defaultdict(set)
    for module, path in mods.items():
        for _, name in imports(path):
            while name and name not in mods:
                name = name.rpartition(".")[0]
            if name and name not in (module, "codeeval"):
                edges[module].add(name)
    return edges


def test_import_paths_equal_file_paths():
    """No package-dir remapping: each module is found at the path its name spells."""
    for module, path in modules().items():
        assert Path(importlib.util.find_spec(module).origin).resolve() == path.resolve(), module


def upward(edges: dict[str, set[str]]) -> list[str]:
    order = {name: i for i, name in enumerate(LAYERS)}
    return sorted(f"{m} ({layer(m)}) -> {t} ({layer(t)})" for m, targets in edges.items() for t in targets
                  if order[layer(t)] > order[layer(m)])


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components of more than one module."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for module in list(edges):
        if module not in index:
            visit(module)
    return found


def test_imports_point_down_only():
    up = upward(graph())
    assert not up, "imports that point up a layer:\n" + "\n".join(up)


def test_no_import_circle():
    assert not circles(graph()), f"import circles: {circles(graph())}"


def test_prefect_only_in_the_orchestration():
    found = sorted(f"{path.relative_to(REPO)}:{line}: {name}" for module, path in modules().items()
                   if layer(module) not in ORCHESTRATION
                   for line, name in imports(path) if name.split(".")[0] == "prefect")
    assert not found, "Prefect imported below tasks/:\n" + "\n".join(found)


def torch_outside_hf() -> list[str]:
    """Every import of torch (module level or in a function) in a generation module outside
    TORCH_IN_GENERATION, as "path:line: name"."""
    return sorted(f"{path.relative_to(REPO)}:{line}: {name}" for module, path in modules().items()
                  if layer(module) == "generation"
                  and not any(module == allowed or module.startswith(allowed + ".") for allowed in TORCH_IN_GENERATION)
                  for line, name in imports(path) if name.split(".")[0] == "torch")


def test_torch_only_in_the_hf_backend():
    found = torch_outside_hf()
    assert not found, "torch imported in generation/ outside hf/ and vllm_backend.py:\n" + "\n".join(found)


def test_the_torch_rule_sees_a_violation(tmp_path, monkeypatch):
    """The torch rule can fail: `import torch` inside a function and `from torch import nn` at module
    level, written into a copy of the tree outside hf/, are found; the same lines inside hf/ are not."""
    import shutil

    copy = tmp_path / "codeeval"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    (copy / "generation" / "prompts" / "bad.py").write_text("def f():\n    import torch\n")
    (copy / "generation" / "api" / "worse.py").write_text("from torch import nn\n")
    (copy / "generation" / "hf" / "fine.py").write_text("import torch\nfrom torch import nn\n")
    monkeypatch.setattr(sys.modules[__name__], "PACKAGE", copy)
    monkeypatch.setattr(sys.modules[__name__], "REPO", tmp_path)
    found = torch_outside_hf()
    assert "codeeval/generation/prompts/bad.py:2: torch" in found
    assert "codeeval/generation/api/worse.py:1: torch" in found
    assert all(line.startswith(("codeeval/generation/prompts/bad.py:", "codeeval/generation/api/worse.py:"))
               for line in found), found


def test_the_checker_sees_a_violation(tmp_path, monkeypatch):
    """The checks can fail: an upward import inside a function, and the circle it closes, written
    into a copy of the tree, are both found."""
    import shutil

    copy = tmp_path / "codeeval"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    (copy / "core" / "bad.py").write_text("def f():\n    from codeeval.flows import evaluate\n")
    (copy / "flows" / "evaluate.py").write_text((copy / "flows" / "evaluate.py").read_text()
                                                + "\nfrom codeeval.core import bad\n")
    monkeypatch.setattr(sys.modules[__name__], "PACKAGE", copy)
    monkeypatch.setattr(sys.modules[__name__], "REPO", tmp_path)
    edges = graph()
    assert "codeeval.core.bad (core) -> codeeval.flows.evaluate (flows)" in upward(edges)
    assert all(line.startswith("codeeval.core.bad ") for line in upward(edges))
    assert ["codeeval.core.bad", "codeeval.flows.evaluate"] in circles(edges)


def diagram_rows() -> dict[str, str]:
    """docs/architecture.md's layer diagram: each layer (its first column) -> the text of its row."""
    text = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    block = text.split("```\n", 2)[1]
    rows: dict[str, str] = {}
    layer_name = None
    for line in block.splitlines():
        if not line.startswith(" │"):
            continue
        if line[3:15].strip():  # the columns: " │ ", layer (12), what it is (16), its modules
            layer_name = line[3:15].strip().rstrip("/")
            rows[layer_name] = ""
        rows[layer_name] += " " + line[31:].rstrip(" │")
    return rows


def test_the_architecture_diagram_draws_the_tree():
    """Every folder of the package is in the diagram, in its layer's row, and nothing else is;
    every module of a layer is named in its row (the diagram drifted once: docs/architecture.md)."""
    rows = diagram_rows()
    drawn = {name for name in rows if name != "app"}
    drawn |= {f"{name}/{sub}" for name, text in rows.items() for sub in re.findall(r"\b([a-z_0-9]+(?:/[a-z_0-9]+)*)/", text)}
    tree = {str(d.relative_to(PACKAGE)) for d in PACKAGE.rglob("*") if d.is_dir() and d.name != "__pycache__"
            and not any(part == "containers" or part.startswith(".") for part in d.relative_to(PACKAGE).parts)}
    assert drawn == tree, f"folders not drawn: {sorted(tree - drawn)}; drawn but absent: {sorted(drawn - tree)}"
    unnamed = [f"{name}/{path.stem}" for name in drawn if name in LAYERS for path in (PACKAGE / name).glob("*.py")
               if path.stem != "__init__" and not re.search(rf"\b{path.stem}\b", rows[name])]
    unnamed += [f"codeeval/{path.stem}" for path in PACKAGE.glob("*.py")
                if path.stem not in ("__init__", "__main__") and not re.search(rf"\b{path.stem}\b", rows["app"])]
    assert not unnamed, f"modules the diagram does not name: {unnamed}"
