"""Recall@k from the references' Dependency_Data pickles (pyan graph), read without pyan and
safely, and the fall-back to our static analysis when they are absent."""
from __future__ import annotations

import ast
import json
import logging
import os
import pickle
import sys
from pathlib import Path

import dill
import pytest
from docker_env import ensure_images

from codeeval.benchmarks.repo.deps import DependencyRecall
from codeeval.benchmarks.repo.family import make
from codeeval.benchmarks.repo.pickles import load_analyzer
from codeeval.benchmarks.spec import LoadOptions, Sample
from codeeval.cli import main
from codeeval.core.errors import UsageError

CORE = '''def scale(v, k):
    return v * k


class Base:
    def unit(self):
        return 1
'''

BOX = '''from shapes import scale
from shapes.core import Base


class Box(Base):
    def __init__(self, w):
        self.w = w

    def area(self):
        """The area."""
        return scale(self.w, self.unit())
'''


STANDIN = Path(__file__).resolve().parent / "fixtures" / "pyan_standin"


def write_analyzer(path: Path) -> None:
    """The upstream structure: defines_edges/uses_edges keyed by the definer's name, `nodes` by
    leaf name, `mro` keyed by the class Node, ast nodes and the logger kept inside."""
    sys.path.insert(0, str(STANDIN))
    try:
        from pyan_zyf_v2.analyzer import CallGraphVisitor
        from pyan_zyf_v2.node import Flavor as F
        from pyan_zyf_v2.node import Node as N
        core, box = "shapes/core.py", "shapes/box.py"
        m_core = N("", "shapes.core", ast.parse(CORE), core, F.MODULE)
        m_box = N("", "shapes.box", ast.parse(BOX), box, F.MODULE)
        scale = N("shapes.core", "scale", ast.parse(CORE).body[0], core, F.FUNCTION)
        base = N("shapes.core", "Base", None, core, F.CLASS)
        unit = N("shapes.core.Base", "unit", None, core, F.METHOD)
        klass = N("shapes.box", "Box", None, box, F.CLASS)
        init = N("shapes.box.Box", "__init__", None, box, F.METHOD)
        area = N("shapes.box.Box", "area", None, box, F.METHOD)
        w = N("shapes.box.Box", "w", None, box, F.ATTRIBUTE)
        v = CallGraphVisitor()
        v.logger = logging.getLogger("pyan_zyf_v2.analyzer")
        v.filenames, v.root = [core, box], "shapes"
        v.nodes = {n.name: [n] for n in (m_core, m_box, scale, base, unit, klass, init, area, w)}
        v.defines_edges = {"shapes.core": {scale, base}, "shapes.core.Base": {unit}, "shapes.box": {klass},
                           "shapes.box.Box": {init, area, w}}
        nested = N("shapes.box.Box.area", "helper", None, box, F.FUNCTION)  # defined inside: not a dependency
        star = N("*", "unit", None, None, F.ATTRIBUTE)  # unresolved: dropped as CallAnalyzer drops it
        # as if pyan had missed `unit` in the pristine body: recall of the unchanged body is 2/3
        v.uses_edges = {"shapes.box.Box.area": {scale, w, nested, star}}
        v.mro = {klass: [klass, base], base: [base]}
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(dill.dumps(v))  # add_func_call.py reads it with `import dill as pickle`
    finally:
        sys.path.remove(str(STANDIN))
        for name in [m for m in sys.modules if m.split(".")[0] == "pyan_zyf_v2"]:
            del sys.modules[name]
    assert "pyan_zyf_v2" not in sys.modules  # the loader must work without it


def shapes_tree(tmp_path: Path, monkeypatch, with_pickle: bool) -> LoadOptions:
    src = tmp_path / "Source_Code" / "Graphics" / "shapes"
    (src / "shapes").mkdir(parents=True)
    (src / "shapes" / "__init__.py").write_text("from .core import scale\n")
    (src / "shapes" / "core.py").write_text(CORE)
    (src / "shapes" / "box.py").write_text(BOX)
    lines = BOX.splitlines()
    sig = lines.index("    def area(self):") + 1
    record = {"namespace": "shapes.box.Box.area", "type": "method", "project_path": "Graphics/shapes",
              "completion_path": "Graphics/shapes/shapes/box.py", "signature_position": [sig, sig],
              "body_position": [sig + 2, sig + 2],
              "dependency": {"intra_class": ["shapes.box.Box.w"], "intra_file": [],
                             "cross_file": ["shapes.core.scale", "shapes.core.Base.unit"]},
              "requirement": {"Functionality": "Area.", "Arguments": ":return: int."},
              "tests": ["tests/test_box.py::test_area"], "indent": 8}
    (tmp_path / "data" / "deveval").mkdir(parents=True)
    (tmp_path / "data" / "deveval" / "data.jsonl").write_text(json.dumps(record) + "\n")
    monkeypatch.setenv("CODEEVAL_DEVEVAL_SOURCE_CODE", str(tmp_path / "Source_Code"))
    monkeypatch.setenv("CODEEVAL_CACHE", str(tmp_path / "cache"))
    deps = tmp_path / "Dependency_Data"
    deps.mkdir()
    if with_pickle:
        write_analyzer(deps / "Graphics" / "shapes" / "analyzer_result.pkl")
    return LoadOptions(tmp_path / "data", dependency_data_root=deps)


COMPLETIONS = ["        return self.w * self.w\n",                      # uses Box.w only
               "        return scale(self.w,  self.unit())  # same AST\n",  # the reference body
               "        return scale(self.w, self.unit()) + 0\n",         # a different body, all three
               "    pass\n"]                                              # the references' "nothing found"


@pytest.mark.parametrize("with_pickle, expected", [
    # with pyan's graph: 1/3; the unchanged body takes pyan's recorded uses (scale, w: 2/3); the
    # changed body resolves `scale` imported from the package to shapes.core.scale and self.unit()
    # along Box's MRO to shapes.core.Base.unit (3/3); "pass" scores 0
    (True, {"recall@1": 1 / 3, "recall@2": 2 / 3, "recall@3": 1.0, "recall@4": 1.0,
            "recall_source": "dependency_data"}),
    # ast alone: `shapes.scale` (the import as written) and no inherited methods: 1/3 at best
    (False, {"recall@1": 1 / 3, "recall@2": 1 / 3, "recall@3": 1 / 3, "recall@4": 1 / 3, "recall_source": "ast"}),
])
def test_recall_at_k_by_hand(tmp_path, monkeypatch, with_pickle, expected):
    task = make("deveval")
    problems = task.load(shapes_tree(tmp_path, monkeypatch, with_pickle))
    samples = [Sample(problems[0].task_id, i, c) for i, c in enumerate(COMPLETIONS)]
    metric = next(m for m in task.metrics if isinstance(m, DependencyRecall))
    out = metric.compute(problems, samples, (1, 2, 3, 4))
    for key, value in expected.items():
        assert out[key] == pytest.approx(value) if isinstance(value, float) else out[key] == value, key
    assert out["recall_tasks"] == 1
    assert out["recall_projects_with_dependency_data"] == int(with_pickle)


class _Evil:
    def __reduce__(self):
        return (os.system, ("touch pwned-by-pickle",))


def test_hostile_pickle_is_refused_in_one_line(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "analyzer_result.pkl"
    path.write_bytes(pickle.dumps(_Evil()))
    with pytest.raises(UsageError) as err:
        load_analyzer(path)
    assert "refused global" in str(err.value) and "system" in str(err.value) and "\n" not in str(err.value)
    assert not (tmp_path / "pwned-by-pickle").exists()
    # builtins that reach code are refused too, and a pickle of something else is named
    path.write_bytes(pickle.dumps(eval))
    with pytest.raises(UsageError, match="refused global builtins.eval"):
        load_analyzer(path)
    path.write_bytes(pickle.dumps({"a": 1}))
    with pytest.raises(UsageError, match="not pyan's CallGraphVisitor"):
        load_analyzer(path)


def test_loaded_graph_keeps_pyan_structure(tmp_path):
    path = tmp_path / "analyzer_result.pkl"
    write_analyzer(path)
    data = path.read_bytes()  # dill refers to the classes by name, as with the real fork installed
    assert b"pyan_zyf_v2.node" in data and b"pyan_zyf_v2.analyzer" in data and b"_create_type" not in data
    v = load_analyzer(path)
    assert sorted(n.get_name() for n in v.uses_edges["shapes.box.Box.area"]) == [
        "*.unit", "shapes.box.Box.area.helper", "shapes.box.Box.w", "shapes.core.scale"]
    klass = v.nodes["Box"][0]
    assert [n.get_name() for n in v.mro[klass]] == ["shapes.box.Box", "shapes.core.Base"]  # identity kept
    assert isinstance(v.nodes["shapes.core"][0].ast_node, ast.Module) and v.logger is None
    assert v.nodes["scale"][0].flavor.value == "function"


def test_results_json_names_the_recall_source(prefect_api, tmp_path, capsys, monkeypatch):
    """End to end: the oracle run with --dependency-data-root passes its test, its recall is the
    pickled graph's (2/3, pyan's recorded uses), results.json says so, and the file is restored."""
    ensure_images()
    shapes_tree(tmp_path, monkeypatch, with_pickle=True)
    project = tmp_path / "Source_Code" / "Graphics" / "shapes"
    (project / "tests").mkdir()
    (project / "tests" / "test_box.py").write_text("from shapes.box import Box\n\n\ndef test_area():\n"
                                                   "    assert Box(3).area() == 3\n")
    (project / "setup.py").write_text("from setuptools import setup\nsetup(name='shapes', install_requires=[])\n")
    before = (project / "shapes" / "box.py").read_bytes()
    out = tmp_path / "run"
    assert main(["run", "--model", "reference", "--tasks", "deveval", "--allow_code_execution",
                 "--data-dir", str(tmp_path / "data"), "--dependency-data-root", str(tmp_path / "Dependency_Data"),
                 "--output-dir", str(out)]) == 0
    capsys.readouterr()
    results = json.loads((out / "results.json").read_text())["deveval"]
    assert results["pass@1"] == 1.0 and results["recall@1"] == pytest.approx(2 / 3)
    assert results["recall_source"] == "dependency_data" and results["recall_projects_with_dependency_data"] == 1
    assert (project / "shapes" / "box.py").read_bytes() == before
