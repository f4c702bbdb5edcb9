# SystemExit(0) before the tests run (what a bare `exit(0)` does without the guard).
import sys


def check(candidate):
    assert candidate(1) == 2, "wrong answer"


sys.exit(0)
check(lambda x: x)
