"""Bad input: one line on stderr, exit code 2, no traceback, before Prefect starts."""
from __future__ import annotations

import subprocess
import sys

import pytest


def codeeval(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "codeeval", *args], capture_output=True, text=True,
                          timeout=120, cwd=cwd)


@pytest.fixture
def bad_generations(tmp_path):
    path = tmp_path / "generations.json"
    path.write_text('{"not": "a list"}')
    return path


@pytest.mark.parametrize("args,message", [
    (["--tasks", "humanevil", "--allow_code_execution"], "unknown task 'humanevil'"),
    (["--tasks", "humaneval", "--allow_code_execution", "--k", "1,10"], "pass@10 needs at least 10 samples"),
    (["--tasks", "humaneval", "--allow_code_execution", "--data-dir", "/nonexistent/data"], "data dir not found"),
    (["--tasks", "humaneval"], "--allow_code_execution"),
    (["--tasks", "humaneval", "--allow_code_execution", "--executor", "local", "--n_samples", "0"], "--n_samples"),
])
def test_bad_input_is_one_line_and_exit_2(data_dir, args, message):
    extra = [] if "--data-dir" in args else ["--data-dir", str(data_dir)]
    result = codeeval("run", "--model", "reference", *args, *extra)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], result.stderr


def test_malformed_generations_file(data_dir, bad_generations):
    result = codeeval("run", "--tasks", "humaneval", "--allow_code_execution", "--data-dir", str(data_dir),
                      "--load_generations_path", str(bad_generations))
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines() == [
        f"codeeval: error: malformed generations file {bad_generations}: expected a list of lists of strings, "
        "one list per problem"]


def test_tasks_lists_the_registry():
    result = codeeval("tasks")
    assert result.returncode == 0
    names = [line.split()[0] for line in result.stdout.splitlines()]
    assert {"humaneval", "humaneval-unstripped", "mbpp", "mbpp-setup"} <= set(names)


def test_do_sample_reads_true_and_false_as_bigcode_does():
    from codeeval.cli_args import build_parser

    def parse(*args):
        return build_parser().parse_args(["run", "--tasks", "humaneval", *args]).do_sample

    assert parse() is True and parse("--do_sample") is True
    assert parse("--do_sample", "False") is False and parse("--do_sample", "false") is False
    assert parse("--do_sample", "True") is True
