"""Checks codeeval/benchmarks/codexglue/moses.py against the Perl detokenizer bigcode runs (not part of the tests:
it needs perl and `pip install mosestokenizer==1.0.0 sacremoses` in a scratch environment).

    python scripts/compare_moses.py     # prints how many token lists differ, ours and sacremoses'

Token lists: every docstring of the importable standard library (whitespace-split and split
the CodeSearchNet way), then random lists over a vocabulary of the rules' edge cases.
"""
from __future__ import annotations

import importlib
import importlib.util
import pkgutil
import random
import re
from pathlib import Path

from mosestokenizer import MosesDetokenizer
from sacremoses import MosesDetokenizer as SacreMoses

_spec = importlib.util.spec_from_file_location("moses", Path(__file__).parents[1] / "codeeval" / "benchmarks" / "moses.py")
ours = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ours)

CSN_TOKENS = re.compile(r"[^\s,'\"`.():\[\]=*;>{\}+-/\\]+|\\+|\.+|\(\)|{\}|\[\]|\(+|\)+|:+|\[+|\]+|{+|\}+|=+|\*+|;+|>+"
                        r"|\++|-+|/+")
VOCAB = ["the", "Returns", "value", "s", "Jones", "it", "x1", "42", "3.5", "é", "Ⅻ", "Ⓐb", "naïve", "ab\u0301",
         ".", ",", "?", "!", ":", ";", "\\", "%", "}", "]", ")", ").", "(", "[", "{", "$", "€", "£", "¿", "¡", "$(",
         "'", '"', "``", "''", "`", "„", "“", "”", "’", "'s", "n't", "'foo", "'é", "'1", "'Ⅻ", "@-@", "-", "--",
         "&lt;", "&gt;", "&amp;", "&quot;", "&apos;", "&#124;", "&#91;", "&#93;", "&bar;", "&bra;", "&ket;",
         "&amp;lt;", "<p>", "</p>", "<", ">", "<b>x</b>", "中文", "한국어", "カタカナ", "文", "x中", "中x", "0", "s'",
         "a'b", "@", "#", "=", "->", "...", "e.g.", "i.e", "http://x.org", "*", "**kwargs", "`foo`", "''foo''",
         '"x"', "«", "»"]


def docstrings() -> list[str]:
    seen: set[str] = set()
    for info in pkgutil.iter_modules():
        if info.name.startswith("_") or info.name in ("antigravity", "this", "idlelib", "tkinter", "turtle"):
            continue
        try:
            module = importlib.import_module(info.name)
        except BaseException:
            continue
        for obj in list(vars(module).values())[:200]:
            doc = getattr(obj, "__doc__", None)
            if isinstance(doc, str) and doc not in seen:
                seen.add(doc)
    return sorted(seen)


def cases(seed: int = 12) -> list[list[str]]:
    out = []
    for doc in docstrings():
        for text in (doc.strip().split("\n\n")[0], doc):
            out += [CSN_TOKENS.findall(text), text.split()]
    rng = random.Random(seed)
    out += [[rng.choice(VOCAB) for _ in range(rng.randint(1, 12))] for _ in range(40000)]
    out += [["<" + rng.choice(["p", "code", "", "a"])] + [rng.choice(VOCAB) for _ in range(rng.randint(0, 6))]
            + [rng.choice([">", "</p>", "x>"])] for _ in range(2000)]
    return [t for t in (" ".join(c).split() for c in out) if t]


def main() -> None:
    lists, sacre = cases(), SacreMoses("en")
    ours_differ = sacre_differ = 0
    with MosesDetokenizer("en") as perl:
        for tokens in lists:
            expected = perl(tokens)
            if ours.detokenize(tokens) != expected:
                ours_differ += 1
                print("ours differ:", tokens, repr(expected), repr(ours.detokenize(tokens)))
            sacre_differ += sacre.detokenize(tokens) != expected
    print(f"{len(lists)} token lists: codeeval/benchmarks/codexglue/moses.py differs on {ours_differ}, sacremoses on {sacre_differ}")


if __name__ == "__main__":
    main()
