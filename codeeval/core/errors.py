"""Errors the CLI reports as one line with exit code 2 (bad input, not a bug)."""


class UsageError(Exception):
    """Bad input from the user: unknown task, malformed file, k > n, missing data dir..."""


class RunFailed(Exception):
    """Some task runs failed; Prefect logged why, and a re-run retries only those."""
