# Exit 0 before the tests run: status 0 but no completion marker.
import os


def check(candidate):
    assert candidate(1) == 2, "wrong answer"


os._exit(0)
check(lambda x: x)
