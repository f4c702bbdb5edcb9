"""Reading the references' Dependency_Data pickles safely, without pyan installed.

`Dependency_Data/<project>/analyzer_result.pkl` is a (dill) pickle of their pyan fork's
`pyan_zyf_v2.analyzer.CallGraphVisitor` over the pristine project: dicts and sets of
`pyan_zyf_v2.node.Node` (namespace, name, flavor, defined, ...), `Flavor` enum members, `Scope`s,
and the `ast` nodes pyan keeps. A pickle can name any callable, so the unpickler resolves only
those classes (to small local stand-ins), the `ast` node classes, a few builtins and the logger
reference; anything else (os.system, dill's code/function builders, ...) is refused with a
one-line error before it can run.
"""
from __future__ import annotations

import ast
import io
import pickle
from functools import lru_cache
from pathlib import Path
from typing import Any

from codeeval.core.errors import UsageError


class _Plain:
    """Stand-in base: takes pickled state as attributes, ignores constructor arguments."""

    def __init__(self, *args, **kwargs):
        pass

    def __setstate__(self, state):
        if isinstance(state, tuple):  # (dict, slots) form
            state = {**(state[0] or {}), **(state[1] or {})}
        self.__dict__.update(state or {})


class Node(_Plain):
    """pyan_zyf_v2.node.Node (hashed by identity, as pyan's; the pickle keeps identities)."""

    def get_name(self) -> str:
        ns = getattr(self, "namespace", None)
        return self.name if ns == "" else f"*.{self.name}" if ns is None else f"{ns}.{self.name}"


class Flavor(_Plain):
    """pyan_zyf_v2.node.Flavor (an Enum pickled as `Flavor(value)`)."""

    def __init__(self, value=None, *args):
        self.value = value

    def __hash__(self):
        return hash(self.value)

    def __eq__(self, other):
        return isinstance(other, Flavor) and self.value == other.value


class Scope(_Plain):
    """pyan_zyf_v2.anutils.Scope."""


class CallGraphVisitor(_Plain):
    """pyan_zyf_v2.analyzer.CallGraphVisitor: nodes, defines_edges, uses_edges, mro, scopes."""


def _no_logger(*args):
    return None


_PYAN = {"node.Node": Node, "node.Flavor": Flavor, "anutils.Scope": Scope,
         "analyzer.CallGraphVisitor": CallGraphVisitor}
# containers only: no getattr/eval/exec, nothing that reaches an attribute or runs code
_BUILTINS = {"set": set, "frozenset": frozenset, "dict": dict, "list": list, "tuple": tuple, "object": object}
_COLLECTIONS = {"OrderedDict", "defaultdict"}


class _Restricted(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        for prefix in ("pyan_zyf_v2.", "pyan."):
            if module.startswith(prefix) and f"{module[len(prefix):]}.{name}" in _PYAN:
                return _PYAN[f"{module[len(prefix):]}.{name}"]
        if module in ("ast", "_ast") and isinstance(getattr(ast, name, None), type) \
                and issubclass(getattr(ast, name), ast.AST):
            return getattr(ast, name)
        if module in ("builtins", "__builtin__") and name in _BUILTINS:
            return _BUILTINS[name]
        if module == "collections" and name in _COLLECTIONS:
            import collections
            return getattr(collections, name)
        if module == "logging" and name == "getLogger":
            return _no_logger
        if module in ("dill._dill", "dill.dill") and name == "_load_type":
            return _load_type
        raise pickle.UnpicklingError(f"refused global {module}.{name}")


def _load_type(name: str):
    """dill's reference to a builtin type by name, for the container types alone."""
    types = {"SetType": set, "DictType": dict, "ListType": list, "TupleType": tuple, "FrozenSetType": frozenset,
             "set": set, "dict": dict, "list": list, "tuple": tuple, "frozenset": frozenset}
    if name not in types:
        raise pickle.UnpicklingError(f"refused dill type {name}")
    return types[name]


def load_analyzer(path: Path) -> CallGraphVisitor:
    """The pickled visitor, or a one-line UsageError naming the file and the refused global."""
    try:
        obj = _Restricted(io.BytesIO(path.read_bytes())).load()
    except (pickle.UnpicklingError, EOFError, AttributeError, TypeError, ValueError, IndexError) as exc:
        raise UsageError(f"{path}: not a pyan analyzer pickle we can read safely ({exc})") from None
    if not isinstance(obj, CallGraphVisitor):
        raise UsageError(f"{path}: holds a {type(obj).__name__}, not pyan's CallGraphVisitor")
    return obj


def analyzer_path(dependency_root: Path, project: str) -> Path:
    """Where the references read it: `<dependency_data_root>/<project path>/analyzer_result.pkl`."""
    return Path(dependency_root) / project / "analyzer_result.pkl"


@lru_cache(maxsize=4)  # keyed by the loaded graph's identity; built once per project
def _defined(graph: CallGraphVisitor) -> dict[str, Node]:
    """Qualified name -> node for the project's defined nodes: what CallAnalyzer.from_visitor
    collects (`nodes` entries with `defined` and a namespace) plus every defines_edges target
    (the fork keys defines_edges by the definer's name)."""
    out: dict[str, Node] = {}
    for items in (getattr(graph, "nodes", None) or {}).values():
        for n in items:
            if isinstance(n, Node) and getattr(n, "defined", False) and getattr(n, "namespace", None) is not None:
                out.setdefault(n.get_name(), n)
    for members in (getattr(graph, "defines_edges", None) or {}).values():
        for n in members:
            if isinstance(n, Node) and getattr(n, "namespace", None) is not None:
                out.setdefault(n.get_name(), n)
    return out


@lru_cache(maxsize=4)
def _by_leaf(graph: CallGraphVisitor) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for name in _defined(graph):
        out.setdefault(name.rsplit(".", 1)[-1], []).append(name)
    return out


def recorded_uses(graph: CallGraphVisitor, namespace: str) -> set[str] | None:
    """What CallAnalyzer.from_visitor reports for the function as the pickle has it (the pristine
    body): its uses edges, less unresolved (`*`) names and what is defined inside it; the
    in_class/in_file/in_object split is dropped, as recall_k.py drops it. None if not recorded."""
    caller = _defined(graph).get(namespace)
    uses = (getattr(graph, "uses_edges", None) or {}).get(namespace)
    if caller is None or uses is None:
        return None
    out = set()
    for n in uses:
        ns = getattr(n, "namespace", None)
        if not isinstance(n, Node) or ns is None or ns == "*":
            continue
        if getattr(n, "filename", None) == getattr(caller, "filename", None) and namespace in ns:
            continue  # nested in the function itself
        out.add(n.get_name())
    return out


def inherited(graph: CallGraphVisitor, class_name: str, attr: str) -> str | None:
    """`<Base>.<attr>` of the first base in the class's MRO (pyan's pass 2) that defines attr."""
    cls = _defined(graph).get(class_name)
    for base in (getattr(graph, "mro", None) or {}).get(cls, [])[1:] if cls is not None else []:
        for member in (graph.defines_edges or {}).get(base.get_name(), ()):
            if isinstance(member, Node) and member.name == attr:
                return member.get_name()
    return None


def canonical(graph: CallGraphVisitor, name: str) -> str:
    """The defining node's name for an imported name the package re-exports (`pkg.f` ->
    `pkg.core.f`), when exactly one project node of that leaf name lies under the package."""
    defined = _defined(graph)
    if name in defined or "." not in name:
        return name
    package, leaf = name.rsplit(".", 1)
    hits = [n for n in _by_leaf(graph).get(leaf, []) if n.startswith(package + ".") and n != name]
    return hits[0] if len(hits) == 1 else name
