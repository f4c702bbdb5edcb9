"""docs/usage.md's `codeeval run` table and `codeeval run --help` describe the same flags: a flag
added, renamed or removed on one side only, or required on one side only, fails here. docs/generation.md's
backend options table is the declaration in codeeval/generation/options.py."""
from __future__ import annotations

import re
from pathlib import Path

from codeeval.cli_args import build_parser

USAGE = Path(__file__).resolve().parents[1] / "docs" / "usage.md"


def run_actions() -> list:
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    return [a for a in sub.choices["run"]._actions if a.option_strings and a.dest != "help"]


def doc_rows() -> dict[str, str]:
    """flag -> its default cell, from the table under `## \\`codeeval run\\``."""
    section = USAGE.read_text().split("## `codeeval run`", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("| `--") and len(cells) >= 3:
            for flag in re.findall(r"`?(--[\w-]+)", cells[0]):
                rows[flag] = cells[1]
    return rows


def test_every_run_flag_is_documented_and_every_documented_flag_exists():
    rows, actions = doc_rows(), run_actions()
    undocumented = [a.option_strings[0] for a in actions if not set(a.option_strings) & set(rows)]
    assert not undocumented, f"in `codeeval run --help`, not in docs/usage.md: {undocumented}"
    known = {s for a in actions for s in a.option_strings}
    assert not set(rows) - known, f"in docs/usage.md, not in `codeeval run --help`: {set(rows) - known}"
    assert len(rows) >= 40


def test_required_means_the_same_in_the_docs_and_in_help():
    rows = doc_rows()
    for action in run_actions():
        default = next((rows[s] for s in action.option_strings if s in rows), None)
        if default is None:
            continue  # the test above names it
        assert (default == "required") == action.required, (action.option_strings, default)
        conditional = "required unless" in default
        assert conditional == ("required unless" in (action.help or "")), (action.option_strings, default)


def test_the_backend_options_table_is_the_declaration():
    """docs/generation.md's options table is `options.markdown()`, row for row: an option added,
    renamed or given another default or parser in codeeval/generation/options.py fails here."""
    from codeeval.generation import BACKENDS, options

    text = (USAGE.parent / "generation.md").read_text()
    table = options.markdown()
    assert table in text, "docs/generation.md's options table is stale: paste codeeval.generation.options.markdown()"
    assert set(options.OPTIONS) == set(BACKENDS)  # every backend declares what it takes, if nothing
    documented = re.findall(r"^\| (\w+) \| `(\w+)` \|", text, re.M)
    assert documented == [(k, o.name) for k, opts in options.OPTIONS.items() for o in opts] and len(documented) >= 25
    shown = {name: cell for name, cell in re.findall(r"^\| \w+ \| `(\w+)` \| [^|]+ \| ([^|]+) \|", text, re.M)}
    assert (shown["backoff_s"], shown["tensor_parallel_size"], shown["cuda_graph"], shown["stream"]) == (
        "1.0", "1", "yes", "yes"), shown  # a number equal to True is not shown as yes


def test_the_training_options_rows_are_the_declaration():
    """docs/usage.md's rows of the classification tasks' flags are `training.args.markdown()`: an option
    added, renamed or given another default in codeeval/training/args.py fails here."""
    from codeeval.training.args import markdown

    assert markdown() in USAGE.read_text(), "docs/usage.md's classification rows are stale: paste " \
                                             "codeeval.training.args.markdown()"
