"""The one vocabulary of yes and no: command-line flags, backend options and the environment
variables codeeval reads all take the same words, so a value that works in one works in all."""
from __future__ import annotations

from typing import Optional

YES = ("1", "true", "yes", "y", "on")
NO = ("0", "false", "no", "n", "off")
WORDS = "yes or no (1/0, true/false, yes/no, on/off)"


def parse(text: str) -> Optional[bool]:
    """True for a yes, False for a no (any case, spaces around), None for any other text."""
    word = text.strip().lower()
    return True if word in YES else False if word in NO else None
