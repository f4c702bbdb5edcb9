"""The top-level array of a JSON file, one element at a time.

bigcode's generations file is one JSON array (a list of programs per problem). json.loads holds
the whole text and every parsed program at once: 2 x the file for HumanEval x 200 (22 MB),
MBPP x 200 more. Read in chunks, the array costs one element at a time; anything irregular is
NotStreamable, and the caller parses the whole text for its exact error message."""
from __future__ import annotations

import json
import re
from typing import Any, Iterator, TextIO

CHUNK = 1 << 20  # characters read at a time
_SPACE = re.compile(r"[ \t\n\r]*")  # JSON's whitespace


class NotStreamable(Exception):
    """Not a well-formed JSON array (or not one this reader follows): parse the whole text."""


def array_items(fh: TextIO) -> Iterator[Any]:
    """Each element of the array that `fh` holds, in order."""
    decoder = json.JSONDecoder()
    buf, pos, eof = "", 0, False

    def fill() -> bool:
        nonlocal buf, pos, eof
        chunk = "" if eof else fh.read(CHUNK)
        if not chunk:
            eof = True
            return False
        buf, pos = buf[pos:] + chunk, 0
        return True

    def skip_space() -> None:
        nonlocal pos
        while True:
            pos = _SPACE.match(buf, pos).end()
            if pos < len(buf) or not fill():
                return

    def next_char() -> str:
        nonlocal pos
        skip_space()
        if pos >= len(buf):
            raise NotStreamable("truncated")
        pos += 1
        return buf[pos - 1]

    if next_char() != "[":
        raise NotStreamable("not an array")
    skip_space()
    if buf[pos:pos + 1] == "]":
        pos += 1
    else:
        while True:
            skip_space()
            while True:  # an element that ends where the buffer does may go on in the next chunk
                try:
                    value, end = decoder.raw_decode(buf, pos)
                    if end < len(buf) or eof:
                        break
                except json.JSONDecodeError:
                    if eof:
                        raise NotStreamable("not JSON") from None
                except (ValueError, RecursionError):
                    raise NotStreamable("not JSON Python reads") from None
                fill()
            yield value
            pos = end
            separator = next_char()
            if separator == "]":
                break
            if separator != ",":
                raise NotStreamable("expected , or ]")
    skip_space()
    if pos < len(buf):
        raise NotStreamable("text after the array")
