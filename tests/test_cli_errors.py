"""Bad input: one line on stderr, exit code 2, no traceback, before Prefect starts."""
from __future__ import annotations

import dataclasses
import subprocess
import sys
import time

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


@pytest.mark.parametrize("args,line", [
    (["run", "--model", "reference", "--tasks", "humanevall", "--allow_code_execution"],
     "codeeval: error: unknown task 'humanevall'; did you mean humaneval? (`codeeval tasks` lists all {tasks})"),
    (["run", "--model", "reference", "--tasks", "qwertyuiop", "--allow_code_execution"],
     "codeeval: error: unknown task 'qwertyuiop' (`codeeval tasks` lists all {tasks})"),
    (["run", "--model", "reference", "--tasks", "humaneval", "--allow_code_execution", "--backend", "transformer"],
     "codeeval: error: unknown backend 'transformer'; did you mean transformers? (choose from {backends})"),
    (["run", "--model", "reference", "--tasks", "humaneval", "--max_new_tokns", "5"],
     "codeeval: error: unrecognized arguments: --max_new_tokns 5; did you mean --max_new_tokens?"),
    (["run", "--model", "reference", "--tasks", "humaneval", "--executor", "dockr"],
     "codeeval run: error: argument --executor: invalid choice: 'dockr' (choose from 'docker', 'local'); "
     "did you mean docker?"),
    (["rnu"], "codeeval: error: argument command: invalid choice: 'rnu' (choose from {commands}); did you mean run?"),
    (["run", "--model", "reference"], "codeeval run: error: the following arguments are required: --tasks"),
])
def test_a_typo_gets_a_suggestion_in_one_line(data_dir, args, line):
    """What a user sees for a misspelled task, backend, flag or command: one line, exit 2, the
    likely spelling (none where nothing is close), and the count of tasks instead of all of them."""
    from codeeval.benchmarks.registry import task_names
    from codeeval.cli_args import build_parser
    from codeeval.generation import BACKENDS

    commands = next(a for a in build_parser()._actions if a.dest == "command").choices
    result = codeeval(*args, "--data-dir", str(data_dir)) if args[0] == "run" else codeeval(*args)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.splitlines() == [line.format(tasks=len(task_names()), backends=", ".join(BACKENDS),
                                                      commands=", ".join(map(repr, commands)))]


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


NO_MODEL = "/nonexistent/model-dir"  # a model that cannot load: an option error comes before any load


@pytest.mark.parametrize("options,message", [
    (["compile_mod=max-autotune-no-cudagraphs"],
     "--backend_option compile_mod: not an option of the transformers backend (did you mean compile_mode?); "
     "its options: decoder, compile, compile_mode,"),
    (["decoder=static", "check_every=x"], "--backend_option check_every='x': an integer >= 1"),
])
def test_a_backend_option_is_checked_before_the_model_loads(options, message):
    """A misspelled option was ignored, a bad value failed on a GPU worker after the queue and the
    model load (codeeval/generation/options.py): now one line, exit 2, before anything loads."""
    started = time.monotonic()
    result = codeeval("run", "--model", NO_MODEL, "--backend", "transformers", "--tasks", "humaneval",
                      "--generation_only", *(a for o in options for a in ("--backend_option", o)))
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"codeeval: error: {message}"), result.stderr
    assert time.monotonic() - started < 30


def test_a_good_set_of_backend_options_passes_the_check():
    """Every parser kind given a good value: the run goes on to the next check (the model path)."""
    result = codeeval("run", "--model", NO_MODEL, "--backend", "transformers", "--tasks", "humaneval",
                      "--generation_only", *("--backend_option", "decoder=static", "--backend_option", "check_every=2",
                                             "--backend_option", "compile=off", "--backend_option", "batch_rows=0"))
    assert result.returncode == 2 and result.stderr.strip().splitlines() == [
        f"codeeval: error: model path not found: {NO_MODEL}"], result.stderr


@pytest.mark.parametrize("kind,options,message", [
    ("transformers", {"decoder": "paged"}, "--backend_option decoder='paged': one of static, dynamic"),
    ("transformers", {"cuda_graph": "maybe"}, "--backend_option cuda_graph='maybe': yes or no (1/0, true/false, "),
    ("transformers", {"prefill_tokens": "0"}, "--backend_option prefill_tokens='0': an integer >= 1"),
    ("openai", {"concurrency": 0}, "--backend_option concurrency=0: an integer >= 1"),
    ("openai", {"timeout_s": "soon"}, "--backend_option timeout_s='soon': a number > 0"),
    ("openai", {"endpoint": "responses"}, "--backend_option endpoint='responses': one of completions, chat"),
    ("openai", {"max_retries": 2.5}, "--backend_option max_retries=2.5: an integer >= 0"),
    ("vllm", {"gpu_memory_utilization": "1.5"}, "--backend_option gpu_memory_utilization='1.5': a number > 0 "
                                                "and <= 1"),
    ("vllm", {"enforce_eager": "eager"}, "--backend_option enforce_eager='eager': yes or no"),
    ("openai", {"base_ulr": "http://x"}, "(did you mean base_url?)"),
    ("reference", {"decoder": "static"}, "--backend_option decoder: the reference backend takes no options"),
    ("transformers", {"compile\nmode": "1"}, "--backend_option 'compile\\nmode': not an option"),  # a YAML key
])
def test_each_parser_kind_refuses_a_bad_value_in_one_line(kind, options, message, tmp_path):
    """check() is what the CLI and the nightly (each model of models.yaml) run first; values may be
    YAML's numbers and booleans as well as the CLI's strings."""
    from codeeval.core.errors import UsageError
    from codeeval.pipeline.config import RunConfig
    from codeeval.pipeline.plan import check

    config = RunConfig(model=NO_MODEL, tasks=["humaneval"], backend=kind, generation_only=True,
                       backend_options=options)
    with pytest.raises(UsageError) as raised:
        check(config)
    assert message in str(raised.value) and "\n" not in str(raised.value), str(raised.value)
    good = {"transformers": {"decoder": "dynamic", "compile": True, "prompt_lookup": 0, "max_context": "2048"},
            "openai": {"concurrency": 4, "timeout_s": 0.5, "stream": "false", "api_key_block": "b", "eos_text": ""},
            "vllm": {"gpu_memory_utilization": 1, "swap_space": "0", "enforce_eager": "yes"}, "reference": {}}
    (tmp_path / "config.json").write_text("{}")  # a model directory that exists: it passes check()
    check(dataclasses.replace(config, model=str(tmp_path), backend_options=good[kind]))
