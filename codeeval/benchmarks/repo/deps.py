"""Recall@k of reference dependencies, by our own static analysis (Python `ast`).

The references (ECB/DEV `parser/recall_k.py`) patch the completion in, re-run a pyan-based
call-graph analysis over the patched file on top of the pickled analysis of the whole project
(`Dependency_Data/<project>/analyzer_result.pkl`), and take the names the function uses
inside its class, its file and other files. Those pickles and that analyzer are not available
here, so this module resolves the names the completed function uses with `ast`, on the patched
file alone:
- `self.x` / `cls.x` / `<Class>.x` / `v.x` after `v = cls(...)`, where the enclosing class
  defines x (a method, a class-level name or a `self.x = ...` assignment) -> intra_class
  `<module>.<Class>.x`; `cls(...)` -> `<module>.<Class>.__init__`;
- `self.x.m` where `self.x = C(...)` in the class and C is a class of this file with method m
  -> intra_file `<module>.C.m` (the one step of type inference pyan makes most often);
- a module-level name of the file (function, class, assignment) -> intra_file `<module>.name`,
  and a call of a class of the file also `<module>.C.__init__` when C defines it;
- a name imported from another module (absolute or relative import), or an attribute of an
  imported module -> cross_file `<module>.name`.
recall = |reference ∩ generated| / |reference| over the three lists together (the category is
ignored, as upstream); tasks with no reference dependency are skipped; an unparsable completion
or the "    pass" body scores 0. docs/repo-level.md lists where this differs from pyan.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Optional, Sequence

import numpy as np

from codeeval.benchmarks.repo.pickles import analyzer_path, canonical, inherited, load_analyzer, recorded_uses
from codeeval.benchmarks.repo.post import EMPTY
from codeeval.benchmarks.spec import Metric, Problem, Sample
from codeeval.executors.repo.patch import Journal, patched_text


def _module_and_class(record: dict) -> tuple[str, Optional[str]]:
    parts = record["namespace"].split(".")
    if record.get("type") == "method":
        return ".".join(parts[:-2]), parts[-2]
    return ".".join(parts[:-1]), None


def _find(tree: ast.Module, record: dict):
    """(class node or None, function node) of the namespace, by the signature's line."""
    line, name = record["signature_position"][0], record["namespace"].split(".")[-1]
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
            first = min([node.lineno] + [d.lineno for d in node.decorator_list])
            if first <= line <= node.body[0].lineno:
                owner = next((c for c in ast.walk(tree) if isinstance(c, ast.ClassDef) and node in c.body), None)
                return owner, node
    return None, None


def _class_members(cls: ast.ClassDef) -> tuple[set[str], dict[str, str]]:
    """Names the class defines, and `self.x = C(...)` constructions (x -> C)."""
    names, built = set(), {}
    for node in cls.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            for t in node.targets if isinstance(node, ast.Assign) else [node.target]:
                if isinstance(t, ast.Name):
                    names.add(t.id)
    for node in ast.walk(cls):
        if isinstance(node, ast.Assign):
            for t in node.targets:
                if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self":
                    names.add(t.attr)
                    if isinstance(node.value, ast.Call) and isinstance(node.value.func, ast.Name):
                        built[t.attr] = node.value.func.id
    return names, built


def _module_names(tree: ast.Module, module: str) -> tuple[dict[str, ast.AST], dict[str, str]]:
    """Module-level definitions, and imported names -> their qualified names."""
    defs: dict[str, ast.AST] = {}
    imported: dict[str, str] = {}
    package = module.rsplit(".", 1)[0] if "." in module else ""
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[:len(package.split(".")) - (node.level - 1)] if package else []
                base = ".".join([*up, *([base] if base else [])])
            for alias in node.names:
                imported[alias.asname or alias.name] = f"{base}.{alias.name}" if base else alias.name
        elif isinstance(node, ast.Import):
            for alias in node.names:
                top = alias.name.split(".")[0]
                imported[alias.asname or top] = alias.name if alias.asname else top
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defs[node.name] = node
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            for t in node.targets if isinstance(node, ast.Assign) else [node.target]:
                if isinstance(t, ast.Name):
                    defs[t.id] = node
    return defs, imported


def dependencies(source: str, record: dict, completion: str, graph=None) -> Optional[set[str]]:
    """The qualified names the completed function uses; None when the patched file does not parse.
    With the references' pickled pyan graph: a function whose AST is the pristine one gets the
    uses pyan recorded for it (exactly what the references compute); otherwise `self.x` inherited
    from a base class resolves along pyan's MRO, and names re-exported by a package resolve to
    their defining module."""
    if completion == EMPTY:
        return None
    try:
        tree = ast.parse(patched_text(source, tuple(record["body_position"]), completion, record["indent"]))
    except (SyntaxError, ValueError):
        return None
    module, class_name = _module_and_class(record)
    cls, func = _find(tree, record)
    if func is None:
        return None
    if graph is not None and (recorded := recorded_uses(graph, record["namespace"])) is not None \
            and ast.dump(func) == _pristine_dump(source, record["namespace"], tuple(record["signature_position"])):
        return recorded
    defs, imported = _module_names(tree, module)
    members, built = _class_members(cls) if cls is not None else (set(), {})
    found: set[str] = set()
    unresolved: set[str] = set()  # self.x the class itself does not define
    instances = {"self", "cls"}  # names bound to the class or its instances inside the function
    if cls is not None:
        instances.add(cls.name)
        for node in ast.walk(func):
            if (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)
                    and isinstance(node.value.func, ast.Name) and node.value.func.id in ("cls", cls.name)):
                instances.update(t.id for t in node.targets if isinstance(t, ast.Name))
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("cls", cls.name)
                    and "__init__" in members):
                found.add(f"{module}.{cls.name}.__init__")
    for node in ast.walk(func):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            owner = node.value.id
            if cls is not None and owner in instances and node.attr in members:
                found.add(f"{module}.{cls.name}.{node.attr}")
            elif cls is not None and owner in instances:
                unresolved.add(node.attr)
            elif owner in imported and owner not in defs:
                found.add(f"{imported[owner]}.{node.attr}")
        elif (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute)
              and isinstance(node.value.value, ast.Name) and node.value.value.id == "self"
              and node.value.attr in built):
            target = defs.get(built[node.value.attr])
            if isinstance(target, ast.ClassDef) and any(getattr(n, "name", None) == node.attr for n in target.body):
                found.add(f"{module}.{target.name}.{node.attr}")
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            if node.id in defs:
                found.add(f"{module}.{node.id}")
                target = defs[node.id]
                if isinstance(target, ast.ClassDef) and any(getattr(n, "name", None) == "__init__"
                                                            for n in target.body):
                    found.add(f"{module}.{node.id}.__init__")
            elif node.id in imported:
                found.add(imported[node.id])
    if graph is not None:
        found = {canonical(graph, n) for n in found}
        found |= {hit for attr in unresolved if (hit := inherited(graph, f"{module}.{cls.name}", attr))}
    return found


@lru_cache(maxsize=8)
def _pristine_dump(source: str, namespace: str, signature_position: tuple) -> Optional[str]:
    """The AST of the function as the file has it (pyan sees ASTs: same dump, same analysis)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    _, func = _find(tree, {"namespace": namespace, "signature_position": signature_position})
    return ast.dump(func) if func is not None else None


def reference_dependencies(record: dict) -> set[str]:
    dep = record.get("dependency") or {}
    return set(dep.get("intra_class", [])) | set(dep.get("intra_file", [])) | set(dep.get("cross_file", []))


def recall(source: str, record: dict, completion: str, graph=None) -> float:
    ref = reference_dependencies(record)
    found = dependencies(source, record, completion, graph)
    return len(ref & found) / len(ref) if found else 0.0


def pristine_source(problem: Problem) -> str:
    """The completion file as it is when no run patches it (read under the project's host lock)."""
    from codeeval.executors.repo.lock import host_lock

    journal = Journal(Path(problem.site.source_root), problem.repo.project)
    with host_lock(journal.project_dir):
        return (Path(problem.site.source_root) / problem.record["completion_path"]).read_text(encoding="utf-8")


def project_graph(problem: Problem):
    """The project's pickled pyan graph when --dependency-data-root holds it, else None (ast only)."""
    root = problem.site.dependency_data_root
    if not root:
        return None
    path = analyzer_path(Path(root), problem.repo.project)
    return load_analyzer(path) if path.is_file() else None


@dataclass(frozen=True)
class DependencyRecall(Metric):
    """Recall@k: the mean over tasks with reference dependencies of the best recall among each
    task's first k samples (ECB/DEV recall_k.py)."""

    name = "recall@k"
    primary = "recall@1"
    uses_k = True
    default_ks: tuple[int, ...] = (1, 10)

    def recalls(self, problems: Sequence[Problem],
                samples: Sequence[Sample]) -> tuple[dict[str, list[float]], dict[str, Any]]:
        """(task_id -> each sample's recall, for tasks with reference dependencies; project -> its graph)."""
        by_id = {p.task_id: p for p in problems}
        sources: dict[str, str] = {}
        graphs: dict[str, Any] = {}
        per_task: dict[str, list[float]] = {}
        for s in samples:
            problem = by_id[s.task_id]
            record = problem.record
            if not reference_dependencies(record):
                continue  # standalone: skipped, as upstream
            if record["completion_path"] not in sources:
                sources[record["completion_path"]] = pristine_source(problem)
            project = problem.repo.project
            if project not in graphs:
                graphs[project] = project_graph(problem)
            per_task.setdefault(s.task_id, []).append(
                recall(sources[record["completion_path"]], record, s.completion, graphs[project]))
        return per_task, graphs

    def per_problem(self, problems: Sequence[Problem], samples: Sequence[Sample],
                    ks: Sequence[int]) -> dict[str, dict[str, float]]:
        per_task, _ = self.recalls(problems, samples)
        return {f"recall@{k}": {t: max(v[:k]) for t, v in per_task.items()} for k in ks}

    def compute(self, problems: Sequence[Problem], samples: Sequence[Sample], ks: Sequence[int]) -> dict[str, Any]:
        per_task, graphs = self.recalls(problems, samples)
        out = {f"recall@{k}": float(np.mean([max(v[:k]) for v in per_task.values()])) if per_task else 0.0
               for k in ks}
        out["recall_tasks"] = len(per_task)
        used = sorted({"dependency_data" if g is not None else "ast" for g in graphs.values()})
        out["recall_source"] = "+".join(used) if used else "ast"
        out["recall_projects_with_dependency_data"] = sum(g is not None for g in graphs.values())
        return out
