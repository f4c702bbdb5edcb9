"""Moses `detokenizer.perl -l en` (revision 4134, the copy inside `mosestokenizer` 1.0.0, the
version bigcode pins) as pure Python, for CodeXGLUE code-to-text references.

bigcode runs the Perl script through a pipe; this port gives the same string for every line
(tests/test_moses.py pins the rules; docs/deviations.md says how it was checked against the
Perl). `sacremoses` ports a later revision and differs: it left-shifts an apostrophe word after
any token (the Perl needs a letter or digit before it), and it detokenizes lines that look
like one XML tag (`<p> ... </p>`), which the Perl passes through untouched.
"""
from __future__ import annotations

import re
import unicodedata
from typing import Sequence

# deescape(), in the Perl's order
_ENTITIES = (("&bar;", "|"), ("&#124;", "|"), ("&lt;", "<"), ("&gt;", ">"), ("&bra;", "["), ("&ket;", "]"),
             ("&quot;", '"'), ("&apos;", "'"), ("&#91;", "["), ("&#93;", "]"), ("&amp;", "&"))
_TAG_LINE = re.compile(r"<.+>")  # Perl /^<.+>$/: such a line is printed as it came
_LEFT_PUNCT = re.compile(r"[,.?!:;\\%}\])]+")
_QUOTES = re.compile(r"[\'\"„“`]+")
_CURLY_DOUBLE = re.compile(r"[„“”]+")
# charIsCJK's code point ranges
_CJK = ((0x1100, 0x11FF), (0x2E80, 0xA4CF), (0xA840, 0xA87F), (0xAC00, 0xD7AF), (0xF900, 0xFAFF),
        (0xFE30, 0xFE4F), (0xFF65, 0xFFDC), (0x20000, 0x2FFFF))


def _is_cjk(char: str) -> bool:
    return any(lo <= ord(char) <= hi for lo, hi in _CJK)


def _is_alpha(char: str) -> bool:
    """Perl's \\p{IsAlpha} (Unicode Alphabetic), less Other_Alphabetic: combining vowel signs and
    circled letters, which would matter only right after a word-initial apostrophe."""
    return char.isalpha() or unicodedata.category(char) == "Nl"


def _is_alnum(char: str) -> bool:
    return _is_alpha(char) or unicodedata.category(char) == "Nd"


def _right_shift(word: str) -> bool:
    """Perl /^[\\p{IsSc}\\(\\[\\{\\¿\\¡]+$/: currency signs and opening brackets attach rightwards."""
    return bool(word) and all(unicodedata.category(c) == "Sc" or c in "([{¿¡" for c in word)


def deescape(text: str) -> str:
    for entity, char in _ENTITIES:
        text = text.replace(entity, char)
    return text


def detokenize(tokens: Sequence[str]) -> str:
    """mosestokenizer's `MosesDetokenizer("en")(tokens)`: the tokens joined by spaces, one line
    through the Perl, its trailing newline dropped."""
    if not tokens:
        return ""
    line = " ".join(tokens)
    if _TAG_LINE.fullmatch(line):
        return line
    words = deescape(f" {line} ".replace(" @-@ ", "-")).split(" ")
    while words and words[-1] == "":  # Perl's split drops trailing empty fields, keeps leading ones
        words.pop()
    text, prepend = "", " "
    quotes: dict[str, int] = {}
    for i, word in enumerate(words):
        previous = words[i - 1] if i > 0 else ""
        if word and _is_cjk(word[0]):
            text += word if previous and _is_cjk(previous[-1]) else prepend + word
            prepend = " "
        elif _right_shift(word):
            text += prepend + word
            prepend = ""
        elif _LEFT_PUNCT.fullmatch(word):
            text += word
            prepend = " "
        elif i > 0 and len(word) > 1 and word[0] == "'" and _is_alpha(word[1]) and previous \
                and _is_alnum(previous[-1]):
            text += word  # an English contraction: n't, 's
            prepend = " "
        elif _QUOTES.fullmatch(word):
            kind = '"' if _CURLY_DOUBLE.fullmatch(word) else word
            count = quotes.get(kind, 0)
            if count % 2 == 0 and word == "'" and i > 0 and previous.endswith("s"):
                text += word  # a possessive: the Jones' house
                prepend = " "
            elif count % 2 == 0:
                text += prepend + word
                prepend = ""
                quotes[kind] = count + 1
            else:
                text += word
                prepend = " "
                quotes[kind] = count + 1
        else:
            text += prepend + word
            prepend = " "
    text = re.sub(" +", " ", text)
    text = text[1:] if text.startswith(" ") else text
    return text[:-1] if text.endswith(" ") else text
