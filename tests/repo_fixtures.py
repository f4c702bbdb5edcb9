"""Synthetic mini repositories in the upstream layout (Source_Code/<topic>/<project>/..., a
data.jsonl with body positions and pytest node ids), written by the tests."""
from __future__ import annotations

import json
from pathlib import Path

MINI_UTIL = '''"""Mini utilities."""
import time


def lo():
    return 0


def clamp(x, lo_, hi):
    """Clamp x to [lo_, hi]."""
    if x < lo_:
        return lo_
    return min(x, hi)


class Box:
    def __init__(self, w, h):
        self.w = w
        self.h = h

    def area(self):
        return self.w * self.h
'''

MINI_TESTS = '''import time

from mini.util import Box, clamp


def test_clamp():
    assert clamp(5, 0, 3) == 3
    assert clamp(-1, 0, 3) == 0
    assert clamp(2, 0, 3) == 2


def test_area():
    time.sleep({sleep})
    assert Box(2, 3).area() == 6
'''

TEXT_UTIL = '''def shout(s):
    return s.upper() + "!"
'''

TEXT_TESTS = '''import time

from minitext.words import shout


def test_shout():
    time.sleep({sleep})
    assert shout("hi") == "HI!"
'''


def _span(text: str, first: str, last: str) -> tuple[int, int]:
    lines = text.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.strip() == first) + 1
    end = next(i for i in range(start - 1, len(lines)) if lines[i].strip() == last) + 1
    return start, end


def write_mini_tree(root: Path, sleep: float = 0.0) -> list[dict]:
    """Source_Code with Utilities/mini and Text/minitext; returns the DevEval data.jsonl records."""
    mini = root / "Utilities" / "mini"
    (mini / "mini").mkdir(parents=True)
    (mini / "tests").mkdir()
    (mini / "mini" / "__init__.py").write_text("")
    (mini / "mini" / "util.py").write_text(MINI_UTIL)
    (mini / "tests" / "test_util.py").write_text(MINI_TESTS.format(sleep=sleep))
    (mini / "setup.py").write_text("from setuptools import setup\nsetup(name='mini', install_requires=[])\n")
    text = root / "Text" / "minitext"
    (text / "minitext").mkdir(parents=True)
    (text / "tests").mkdir()
    (text / "minitext" / "__init__.py").write_text("")
    (text / "minitext" / "words.py").write_text(TEXT_UTIL)
    (text / "tests" / "test_words.py").write_text(TEXT_TESTS.format(sleep=sleep))
    req = {"Functionality": "Do it.", "Arguments": ":return: a value."}
    clamp_sig = _span(MINI_UTIL, "def clamp(x, lo_, hi):", "def clamp(x, lo_, hi):")
    area_sig = _span(MINI_UTIL, "def area(self):", "def area(self):")
    shout_sig = _span(TEXT_UTIL, "def shout(s):", "def shout(s):")
    return [
        {"namespace": "mini.util.clamp", "type": "function", "project_path": "Utilities/mini",
         "completion_path": "Utilities/mini/mini/util.py", "signature_position": list(clamp_sig),
         "body_position": list(_span(MINI_UTIL, "if x < lo_:", "return min(x, hi)")),
         "dependency": {"intra_class": [], "intra_file": ["mini.util.lo"], "cross_file": []},
         "requirement": req, "tests": ["tests/test_util.py::test_clamp"], "indent": 4},
        {"namespace": "mini.util.Box.area", "type": "method", "project_path": "Utilities/mini",
         "completion_path": "Utilities/mini/mini/util.py", "signature_position": list(area_sig),
         "body_position": list(_span(MINI_UTIL, "return self.w * self.h", "return self.w * self.h")),
         "dependency": {"intra_class": ["mini.util.Box.w", "mini.util.Box.h"], "intra_file": [], "cross_file": []},
         "requirement": req, "tests": ["tests/test_util.py::test_area"], "indent": 8},
        {"namespace": "minitext.words.shout", "type": "function", "project_path": "Text/minitext",
         "completion_path": "Text/minitext/minitext/words.py", "signature_position": list(shout_sig),
         "body_position": [shout_sig[1] + 1, shout_sig[1] + 1],
         "dependency": {"intra_class": [], "intra_file": [], "cross_file": []},
         "requirement": req, "tests": ["tests/test_words.py::test_shout"], "indent": 4},
    ]


def write_data(data_dir: Path, family: str, records: list[dict]) -> None:
    (data_dir / family).mkdir(parents=True, exist_ok=True)
    (data_dir / family / "data.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))


ENV_CODE = '''"""A lock and a kind, from an sdist-only package and the stdlib."""
import enum
import typing

import rwlock


def make_lock():
    return rwlock.RWLock()


class Kind(enum.StrEnum):
    A = "a"
'''

ENV_TESTS = '''import concurrent.futures
import enum
import sys
import sysconfig
import typing

from envy.core import Kind, make_lock

STDLIB = sysconfig.get_paths()["stdlib"]


def test_sdist_only_dependency():
    lock = make_lock()
    with lock.reader_lock:
        pass


def test_stdlib_not_shadowed_by_backports():
    assert typing.__file__.startswith(STDLIB), typing.__file__
    assert enum.__file__.startswith(STDLIB), enum.__file__
    assert concurrent.futures.__file__.startswith(STDLIB), concurrent.futures.__file__
    assert Kind.A == "a"
    assert sys.path.index(STDLIB) < min(i for i, p in enumerate(sys.path) if "site-packages" in p)
'''


def write_env_tree(root: Path) -> list[dict]:
    """Source_Code with two projects whose environments are hard: Utilities/envy needs `rwlock`
    (PyPI serves only an sdist), `typing`, `enum34` and `futures==3.4.0` (backports of stdlib
modules; the last one an sdist only, for Python 2); Utilities/
    lost needs a distribution no index has. Returns the DevEval records (2 + 1 tasks)."""
    envy = root / "Utilities" / "envy"
    (envy / "envy").mkdir(parents=True)
    (envy / "tests").mkdir()
    (envy / "envy" / "__init__.py").write_text("")
    (envy / "envy" / "core.py").write_text(ENV_CODE)
    (envy / "tests" / "test_core.py").write_text(ENV_TESTS)
    (envy / "setup.py").write_text("from setuptools import setup\n"
                                   "setup(name='envy', install_requires=['rwlock', 'typing', 'enum34', 'futures==3.4.0'])\n")
    lost = root / "Utilities" / "lost"
    (lost / "lost").mkdir(parents=True)
    (lost / "lost" / "__init__.py").write_text("def one():\n    return 1\n")
    (lost / "tests").mkdir()
    (lost / "tests" / "test_one.py").write_text("from lost import one\n\n\ndef test_one():\n    assert one() == 1\n")
    (lost / "requirements.txt").write_text("codeeval-no-such-distribution-zz==1.0\n")
    req = {"Functionality": "Do it.", "Arguments": ":return: a value."}
    sig = _span(ENV_CODE, "def make_lock():", "def make_lock():")
    body = [sig[1] + 1, sig[1] + 1]
    base = {"type": "function", "project_path": "Utilities/envy", "completion_path": "Utilities/envy/envy/core.py",
            "signature_position": list(sig), "body_position": body, "indent": 4, "requirement": req,
            "dependency": {"intra_class": [], "intra_file": [], "cross_file": ["rwlock.RWLock"]}}
    return [
        dict(base, namespace="envy.core.make_lock", tests=["tests/test_core.py::test_sdist_only_dependency"]),
        dict(base, namespace="envy.core.make_lock#stdlib", tests=["tests/test_core.py::test_stdlib_not_shadowed_by_backports"]),
        {"namespace": "lost.one", "type": "function", "project_path": "Utilities/lost",
         "completion_path": "Utilities/lost/lost/__init__.py", "signature_position": [1, 1], "body_position": [2, 2],
         "indent": 4, "requirement": req, "dependency": {"intra_class": [], "intra_file": [], "cross_file": []},
         "tests": ["tests/test_one.py::test_one"]},
    ]
