"""Runs inside the sandbox, inlined into the harnesses that import it (codeeval/benchmarks/harness_text.py):
the references' WriteOnlyStringIO (EvalPlus, MERA) as one context manager."""
import contextlib
import io
import sys


class _Sink(io.StringIO):
    """Swallows output; reading raises, so a program that reads stdin fails as in the references."""

    def read(self, *args, **kwargs):
        raise OSError

    readline = readlines = read

    def readable(self, *args, **kwargs):
        return False


@contextlib.contextmanager
def swallowed():
    """stdout and stderr swallowed, stdin unreadable, for the duration."""
    sink = _Sink()
    saved = sys.stdin
    with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
        sys.stdin = sink
        try:
            yield
        finally:
            sys.stdin = saved
