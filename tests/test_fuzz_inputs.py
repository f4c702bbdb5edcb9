"""Fuzz of every file the harness reads (issue 23, item 3): saved generations (bigcode's JSON,
JSONL rows, gzipped or not), each family's data files behind --data-dir, the nightly models file
and task lists. Whatever the bytes, the answer is the file's content, usable by the task, or a
UsageError (the CLI's one line and exit code 2); never a traceback, never a record that cannot be
right for the task taken in and then crashing the run or being scored.

Library functions are called directly (fast); a few CLI cases prove the end-to-end contract. The
examples the fuzzer found are kept as explicit cases (`FOUND_*`).
"""
from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from codeeval.benchmarks.data import encodable
from codeeval.benchmarks.registry import get_task
from codeeval.benchmarks.spec import LoadOptions, Problem, dataset_prompt
from codeeval.core.errors import UsageError
from codeeval.generation.replay.backend import parse
from codeeval.pipeline.config import RunConfig

FIXTURES = Path(__file__).parent / "fixtures"
FUZZ = settings(max_examples=60, deadline=None, derandomize=True,  # the same cases in every CI run
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
PROBLEMS = [Problem("T/0", 0, "def f():", {"prompt": "def f():\n"}), Problem("T/1", 1, "def g():", {"prompt": "g"}),
            Problem("11", 2, "x", {"prompt": "x"})]

# JSON values of every shape, lone surrogates included (a JSON file can hold them, no program file can)
TEXT = st.text(max_size=12) | st.sampled_from(["\ud800", "a\udfff", "", "def f(): pass"])
SCALARS = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | TEXT
JSON = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3),
                    max_leaves=8)


def dumps(value) -> str:
    return json.dumps(value, ensure_ascii=True)  # \ud800 as an escape: what a JSON writer emits


def write(path: Path, text: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(gzip.compress(text, compresslevel=1) if path.suffix == ".gz" else text)
    return path


def refused_or(fn):
    """fn()'s result, or None when it raised UsageError (anything else fails the test)."""
    try:
        return fn()
    except UsageError as exc:
        assert "\n" not in str(exc) and str(exc), repr(exc)  # the CLI prints it as one line
        return None


# ---------------------------------------------------------------------------------------------
# saved generations (codeeval/generation/replay/backend.py): every accepted shape, and anything else

ROW = st.fixed_dictionaries({"task_id": st.sampled_from(["T/0", "T/1", "11"]) | JSON},
                            optional={"completion": TEXT | JSON, "solution": TEXT | JSON, "namespace": JSON})
ROWS = st.lists(ROW | JSON, min_size=1, max_size=8)
SUFFIXES = st.sampled_from([".json", ".jsonl", ".json.gz", ".jsonl.gz"])


def check_programs(programs: dict, prefix) -> None:
    """An accepted file: samples for every problem, each a program text that can be written."""
    assert set(programs) >= {p.task_id for p in PROBLEMS}
    for p in PROBLEMS:
        assert programs[p.task_id] and all(isinstance(s, str) and encodable(s) for s in programs[p.task_id])


@FUZZ
@given(suffix=SUFFIXES, content=st.binary(max_size=200) | ROWS.map(lambda rows: "\n".join(map(dumps, rows)).encode())
       | st.lists(st.lists(TEXT, max_size=3) | JSON, max_size=4).map(lambda v: dumps(v).encode()),
       completion_rows=st.booleans())
def test_any_generations_file_is_read_whole_or_refused(tmp_path, suffix, content, completion_rows):
    path = write(tmp_path / f"g{suffix}", content)
    prefix = dataset_prompt if completion_rows else None
    programs = refused_or(lambda: parse(path, PROBLEMS, prefix, "fuzz"))
    if programs is not None:
        check_programs(programs, prefix)


@FUZZ
@given(value=st.lists(JSON, max_size=6), indent=st.sampled_from([None, 0, 2]), chunk=st.sampled_from([1, 3, 7, 4096]),
       noise=st.sampled_from(["", " ", "\n\t", "x", ",", "]", "[", "\ufeff"]), at=st.integers(0, 400))
def test_the_streamed_array_is_json_loads_or_not_streamable(value, indent, chunk, noise, at, monkeypatch):
    """The replay file's stream reader (replay_stream.array_items), read in chunks as small as one
    character, gives json.loads's elements, or NotStreamable where the text is no JSON array."""
    import io

    from codeeval.generation.replay import stream as replay_stream

    text = json.dumps(value, indent=indent)
    text = text[:at] + noise + text[at:]
    monkeypatch.setattr(replay_stream, "CHUNK", chunk)
    try:
        expected = json.loads(text)
    except ValueError:
        expected = None
    try:
        got = list(replay_stream.array_items(io.StringIO(text)))
    except replay_stream.NotStreamable:
        got = None
    if isinstance(expected, list):
        assert got == expected
    else:
        assert got is None


@FUZZ
@given(lists=st.lists(st.lists(st.text(max_size=5), max_size=3), min_size=1, max_size=5), spill_group=st.integers(1, 4))
def test_spilled_programs_read_back_per_shard_as_parsed(tmp_path, lists, spill_group, monkeypatch):
    """The replay backend's spill (replay_spill.Spill) gives every shard of problems next to
    each other the programs that parse() gives them, however the rows fall into row groups."""
    from codeeval.generation.replay import spill as replay_spill
    from codeeval.generation.replay.backend import Reader

    assume(all(lists) and all(encodable(s) for g in lists for s in g))
    monkeypatch.setattr(replay_spill, "ROW_GROUP", spill_group)
    problems = [Problem(f"T/{i}", i, "p", {"prompt": "p"}) for i in range(len(lists))]
    path = write(tmp_path / "g.json", dumps(lists).encode())
    parsed = parse(path, problems)
    spill = replay_spill.Spill(Reader(path, problems, None, "fuzz").items())
    try:
        for start in range(len(problems)):
            for stop in range(start + 1, len(problems) + 1):
                ids = [p.task_id for p in problems[start:stop]]
                assert spill.read(ids) == {t: parsed[t] for t in ids}
    finally:
        spill.close()
    assert not Path(spill.path).exists()


@FUZZ
@given(rows=st.lists(st.tuples(st.sampled_from(PROBLEMS), st.sampled_from(["completion", "solution"]), TEXT),
                     min_size=3, max_size=9), suffix=st.sampled_from([".jsonl", ".jsonl.gz"]))
def test_well_formed_rows_are_read_as_their_tool_means_them(tmp_path, rows, suffix):
    """Rows of every problem: completions continue the dataset's prompt, solutions are whole;
    a row whose text cannot be written is refused."""
    assume({p.task_id for p, _, _ in rows} == {p.task_id for p in PROBLEMS})
    path = write(tmp_path / f"g{suffix}", "\n".join(dumps({"task_id": p.task_id, key: text})
                                                   for p, key, text in rows).encode())
    programs = refused_or(lambda: parse(path, PROBLEMS, dataset_prompt, "fuzz"))
    expected = {p.task_id: [] for p in PROBLEMS}
    for p, key, text in rows:
        expected[p.task_id].append(text if key == "solution" else p.record["prompt"] + text)
    if not all(encodable(t) for _, _, t in rows):
        assert programs is None
        return
    assert programs == expected
    if any(key == "completion" for _, key, _ in rows):  # a task no tool writes completion rows for
        with pytest.raises(UsageError, match="takes no"):
            parse(path, PROBLEMS, None, "fuzz")


FOUND_GENERATIONS = [  # what the fuzzer found: each a traceback (or a crash later in the run) before
    ("g.json", b"\xff\xfe[[", "not UTF-8"),
    ("g.jsonl", b'{"task_id": "T/0", "solution": "\xff"}\n', "not UTF-8"),
    ("g.jsonl.gz", gzip.compress(b"\xff\xff\n", mtime=0), "not UTF-8"),
    ("g.json", b"[" * 100_000 + b"]" * 100_000, "RecursionError"),
    ("g.json", b"[" + b"1" * 5000 + b"]", "ValueError"),
    ("g.jsonl", b'{"task_id": "T/0", "solution": "\\ud800"}\n{"task_id": "T/1", "solution": "a"}\n', "surrogate"),
    ("g.json", b'[["\\udfff"], ["a"], ["b"]]', "surrogate"),
    ("g.jsonl", b'{"task_id": {"a": 1}, "solution": "x"}\n', "expected"),
    ("g.jsonl", b'{"task_id": true, "solution": "x"}\n', "expected"),
    ("g.json", b"[]", "holds no problems"),
]


@pytest.mark.parametrize("name,content,message", FOUND_GENERATIONS)
def test_generations_the_fuzzer_found(tmp_path, name, content, message):
    (tmp_path / name).write_bytes(content)
    with pytest.raises(UsageError, match=message):
        parse(tmp_path / name, PROBLEMS, dataset_prompt, "fuzz")


# ---------------------------------------------------------------------------------------------
# each family's data files (the loaders behind --data-dir)

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
# task -> (the data root it loads from, the files fuzzed (relative to it)); one task per family
FAMILIES = {
    "humaneval": (DATA, ["humaneval/HumanEval.jsonl.gz"]),
    "mbpp-setup": (DATA, ["mbpp/mbpp.jsonl"]),
    "mbppplus": (DATA, ["mbpp_plus/MbppPlus.jsonl.gz"]),
    "humanevalplus-mini-bigcode": (DATA, ["humaneval_plus/HumanEvalPlus-Mini.jsonl.gz"]),
    "pal-gsm8k-greedy": (DATA, ["gsm8k/test.jsonl", "bigcode_fewshot/gsm8k_few_shot_prompts.json"]),
    "pal-gsmhard-greedy": (DATA, ["gsm_hard/gsmhardv2.jsonl", "bigcode_fewshot/gsm8k_few_shot_prompts.json"]),
    "conala": (DATA, ["conala/conala-test.json", "bigcode_fewshot/conala_few_shot_prompts.json"]),
    "concode": (DATA, ["concode/dev.json"]),
    "spider": (DATA, ["spider/dev.json"]),
    "multiple-lua": (DATA, ["multipl_e/prompts/humaneval-lua-reworded.jsonl.gz"]),
    "apps-introductory": (FIXTURES, ["apps/test.jsonl"]),
    "codexglue_code_to_text-python": (FIXTURES, ["codexglue_code_to_text/python/test.jsonl"]),
    "ruhumaneval": (FIXTURES, ["ruhumaneval/public_test.jsonl"]),
    "ds1000-all-completion": (FIXTURES, ["ds1000/ds1000.jsonl"]),
}


def read_lines(path: Path) -> list[str]:
    raw = path.read_bytes()
    return (gzip.decompress(raw) if path.suffix == ".gz" else raw).decode("utf-8").splitlines()


@st.composite
def mutated(draw, lines: list[str]) -> bytes:
    """The file with one thing wrong: a field of a record changed or gone, a record replaced, bytes
    inserted, or the file cut short. A JSON document (one line or several) is edited as a whole."""
    how = draw(st.sampled_from(["field", "field", "record", "bytes", "cut"]))
    whole = len(lines) == 1 or not lines[0].lstrip().startswith("{") or not lines[0].rstrip().endswith("}")
    if whole:  # a JSON array or object: one document
        lines = ["\n".join(lines)]
    i = draw(st.integers(0, len(lines) - 1))
    if how in ("field", "record"):
        doc = json.loads(lines[i])
        target = doc
        if isinstance(doc, list):
            target = doc[draw(st.integers(0, len(doc) - 1))]
        if how == "record" or not isinstance(target, dict) or not target:
            value = draw(JSON)
            if isinstance(doc, list):
                doc[doc.index(target)] = value
            else:
                doc = value
        else:
            key = draw(st.sampled_from(sorted(target)))
            if draw(st.booleans()):
                del target[key]
            else:
                target[key] = draw(JSON)
        lines[i] = dumps(doc)
        return "\n".join(lines).encode()
    text = "\n".join(lines).encode()
    at = draw(st.integers(0, len(text)))
    return text[:at] if how == "cut" else text[:at] + draw(st.binary(min_size=1, max_size=8)) + text[at:]


def assert_usable(task: str, problems: list[Problem]) -> None:
    """What the run computes from each record before and around the sandbox works, and every text
    it would write is writable: a record accepted at load is one the task can score."""
    from codeeval.benchmarks.evalplus.judge import DifferentialTests, OneTestProgram, truth_key, truth_program

    spec = get_task(task)  # no problems at all: plan_task refuses the task
    for p in problems:
        reference = spec.reference_solution(p)
        texts = [p.task_id, p.prompt, reference, spec.postprocess(p, " pass\n", ())]
        if spec.completion_prefix is not None:
            texts.append(spec.completion_prefix(p))
        if isinstance(spec.execution, (DifferentialTests, OneTestProgram)):
            truth_key(p)
            program = truth_program(p)
        elif spec.execution is not None:
            program = spec.execution.build(p, reference, None)
        else:
            program = None
        if program is not None:
            texts.append(program.code)
        assert all(isinstance(t, str) and encodable(t) for t in texts), p.task_id


def data_copy(root: Path, files: list[str], into: Path) -> Path:
    """A data dir holding copies of the family's files (the fuzzed one is then overwritten)."""
    for name in files:
        (into / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(root / name, into / name)
    return into


@pytest.mark.parametrize("task", sorted(FAMILIES))
def test_each_family_loads_its_real_data(task):
    """The fuzz below starts from these files: each loads as is and passes the usability check."""
    from codeeval.pipeline.plan import load_problems

    root, _ = FAMILIES[task]
    assert_usable(task, load_problems(get_task(task), LoadOptions(root)))


@pytest.mark.parametrize("task", sorted(FAMILIES))
def test_any_change_to_a_family_s_data_is_loaded_usable_or_refused(task, tmp_path):
    from codeeval.pipeline.plan import load_problems

    root, files = FAMILIES[task]
    data_dir = data_copy(root, files, tmp_path / "data")
    originals = {name: read_lines(root / name) for name in files}

    @settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(data=st.data())
    def fuzz(data):
        name = data.draw(st.sampled_from(files))
        for other in files:
            shutil.copyfile(root / other, data_dir / other)
        write(data_dir / name, data.draw(mutated(list(originals[name]))))
        problems = refused_or(lambda: load_problems(get_task(task), LoadOptions(data_dir)))
        if problems is not None:
            assert_usable(task, problems)

    fuzz()


FOUND_DATA = [  # (task, file, the change, message): what the fuzzer found, each a traceback before
    ("humaneval", "humaneval/HumanEval.jsonl.gz", lambda lines: lines[:5] + [lines[5][:50]] + lines[6:],
     "line 6: not JSON"),
    ("humaneval", "humaneval/HumanEval.jsonl.gz", lambda lines: lines[:3] + ["[1, 2]"] + lines[4:],
     "line 4: not a JSON object"),
    # accepted before, then a TypeError in the run's execute stage ("\n" + 5)
    ("humaneval", "humaneval/HumanEval.jsonl.gz",
     lambda lines: [dumps(dict(json.loads(lines[0]), test=5))] + lines[1:], "record 0 is malformed: its 'test' is a int, expected str"),
    ("mbpp-setup", "mbpp/mbpp.jsonl", lambda lines: [dumps(dict(json.loads(lines[20]), test_list=[]))
                                                     if i == 20 else line for i, line in enumerate(lines)],
     "non-empty test_list"),
    ("mbpp-setup", "mbpp/mbpp.jsonl", lambda lines: [dumps(dict(json.loads(lines[20]), task_id="x"))
                                                     if i == 20 else line for i, line in enumerate(lines)],
     "integer task_id"),
    ("mbppplus", "mbpp_plus/MbppPlus.jsonl.gz",
     lambda lines: [dumps(dict(json.loads(lines[0]), base_input=[1, 2]))] + lines[1:], "argument lists"),
    ("mbppplus", "mbpp_plus/MbppPlus.jsonl.gz",
     lambda lines: [dumps(dict(json.loads(lines[0]), atol=True))] + lines[1:], "'atol' is a bool"),
    ("pal-gsm8k-greedy", "bigcode_fewshot/gsm8k_few_shot_prompts.json", lambda lines: ['{"questions": 1}'],
     "expected 8"),
    ("pal-gsmhard-greedy", "gsm_hard/gsmhardv2.jsonl",
     lambda lines: [dumps(dict(json.loads(lines[0]), target="1"))] + lines[1:], "'target' is a str"),
    ("conala", "conala/conala-test.json", lambda lines: ["\n".join(lines).replace('"snippet"', '"snip"', 1)],
     "'snippet' is missing"),
    ("humaneval", "humaneval/HumanEval.jsonl.gz",
     lambda lines: [dumps(dict(json.loads(lines[0]), prompt="\ud800"))] + lines[1:], "surrogate"),
    ("ruhumaneval", "ruhumaneval/public_test.jsonl", lambda lines: ["\x00garbage"], "not JSON"),
    ("apps-introductory", "apps/test.jsonl",  # a TypeError in json.loads(True) before
     lambda lines: [dumps(dict(json.loads(lines[0]), input_output=True))] + lines[1:], "'input_output' is a bool"),
    ("ds1000-all-completion", "ds1000/ds1000.jsonl",  # accepted before, then a TypeError building its program
     lambda lines: [dumps(dict(json.loads(lines[0]), code_context=None))] + lines[1:], "'code_context' is a NoneType"),
]


@pytest.mark.parametrize("task,name,change,message", FOUND_DATA)
def test_data_the_fuzzer_found(tmp_path, task, name, change, message):
    from codeeval.pipeline.plan import load_problems

    root, files = FAMILIES[task]
    data_dir = data_copy(root, files, tmp_path / "data")
    write(data_dir / name, "\n".join(change(read_lines(root / name))).encode())
    with pytest.raises(UsageError, match=message):
        load_problems(get_task(task), LoadOptions(data_dir))


# ---------------------------------------------------------------------------------------------
# models files (codeeval/reporting/nightly.py load_models) and task lists (--tasks)

KEYS = st.sampled_from(["model", "tasks", "limit", "backend", "generation", "n_samples", "k", "data_dir",
                        "allow_code_execution", "backend_options", "output_dir", "limit_start", "memory_mb"])
ENTRY = st.dictionaries(KEYS | TEXT, JSON | st.sampled_from(["humaneval", ["humaneval", "mbpp"], "reference"]),
                        max_size=5).map(lambda d: {"model": "reference", "tasks": ["humaneval"], **d})
GENERATION_ENTRY = ENTRY.flatmap(lambda d: st.dictionaries(
    st.sampled_from(["n_samples", "temperature", "do_sample", "max_new_tokens", "seed", "typo"]), JSON,
    max_size=3).map(lambda g: {**d, "generation": g}))
MODELS = st.fixed_dictionaries({"models": st.lists(ENTRY | GENERATION_ENTRY | JSON, min_size=1, max_size=3)},
                               optional={"defaults": st.dictionaries(KEYS, JSON, max_size=3) | JSON})


def models_text(value) -> bytes:
    try:
        return yaml.safe_dump(value, allow_unicode=False).encode()
    except yaml.YAMLError:  # a surrogate key yaml will not write: the JSON spelling is YAML too
        return dumps(value).encode()


@FUZZ
@given(content=MODELS.map(models_text) | st.binary(max_size=120) | TEXT.map(lambda t: t.encode("utf-8", "replace")))
def test_any_models_file_gives_checked_configs_or_one_line(tmp_path, content):
    from codeeval.pipeline.plan import check
    from codeeval.reporting.nightly import load_models

    path = tmp_path / "models.yaml"
    path.write_bytes(content)
    configs = refused_or(lambda: load_models(path, tmp_path / "runs"))
    for config in configs or []:
        assert isinstance(config, RunConfig) and isinstance(config.run_id, str)
        refused_or(lambda: check(config))  # what `codeeval nightly` does next: one line or fine


FOUND_MODELS = [  # what the fuzzer found: each a TypeError traceback (or a crash in the run) before
    ("defaults: [1]\nmodels: [{model: a, tasks: [humaneval]}]", "`defaults` must be a mapping"),
    ("models: [{model: a, tasks: [humaneval], generation: [1]}]", "`generation` must be a mapping"),
    ("models: [{model: a, tasks: 5}]", "tasks must be a list of str"),
    ("models: [{model: [1], tasks: [humaneval]}]", "model must be str"),
    ("models: [{model: a, tasks: [humaneval], generation: {n_samples: abc}}]", "n_samples must be int"),
    ("models: [{model: a, tasks: [humaneval], limit: ten}]", "limit must be int or null"),
    ("models: [{model: a, tasks: [[1]]}]", "tasks must be a list of str"),
    ("models: [{model: a, tasks: [humaneval], 1: 2}]", "unknown key"),
    ("models: [{model: a, tasks: [humaneval], \"\\n\": 2}]", r"unknown key\(s\) '\\n'$"),  # was two lines
    ("models: [{model: a, tasks: [humaneval], allow_code_execution: 'no'}]", "allow_code_execution must be bool"),
]


@pytest.mark.parametrize("text,message", FOUND_MODELS)
def test_models_files_the_fuzzer_found(tmp_path, text, message):
    from codeeval.reporting.nightly import load_models

    path = tmp_path / "models.yaml"
    path.write_text(text)
    with pytest.raises(UsageError, match=message):
        load_models(path)
    (tmp_path / "bad.yaml").write_bytes(b"\xff\xfe")
    with pytest.raises(UsageError, match="not UTF-8"):
        load_models(tmp_path / "bad.yaml")
    with pytest.raises(UsageError, match="cannot read"):
        load_models(tmp_path)  # a directory


@FUZZ
@given(tasks=st.lists(st.sampled_from(["humaneval", "mbpp", "pal-gsm8k-greedy", " conala ", ""]) | TEXT,
                      max_size=4).map(",".join))
def test_any_task_list_is_known_tasks_or_one_line(tasks):
    from codeeval.benchmarks.registry import TASKS
    from codeeval.cli_args import build_parser, config_from_args
    from codeeval.pipeline.plan import check

    # `--tasks=` form: argparse itself refuses a separate value that starts with "-" (exit 2, one line)
    args = build_parser().parse_args(["run", "--model", "reference", f"--tasks={tasks}", "--allow_code_execution"])
    config = config_from_args(args)
    if refused_or(lambda: check(config) or True):
        assert config.tasks and set(config.tasks) <= set(TASKS) and len(set(config.tasks)) == len(config.tasks)


# ---------------------------------------------------------------------------------------------
# the CLI's contract, end to end: exit 2, one line on stderr, nothing written


def cli(capsys, *argv) -> tuple[int, list[str]]:
    from codeeval.cli import main

    code = main(list(argv))
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return code, err.strip().splitlines()


@pytest.mark.parametrize("name,content,message", [FOUND_GENERATIONS[i] for i in (0, 3, 5)])
def test_cli_refuses_a_bad_generations_file_in_one_line_and_writes_nothing(tmp_path, capsys, data_dir, name,
                                                                          content, message):
    (tmp_path / name).write_bytes(content)
    out = tmp_path / "runs" / "out"
    code, lines = cli(capsys, "run", "--tasks", "humaneval", "--limit", "2", "--load_generations_path",
                      str(tmp_path / name), "--allow_code_execution", "--data-dir", str(data_dir),
                      "--output-dir", str(out))
    assert code == 2 and len(lines) == 1 and message in lines[0], lines
    assert not (tmp_path / "runs").exists()  # the output dir made for the write check is gone again


def test_cli_refuses_malformed_data_and_leaves_an_existing_run_as_it_was(tmp_path, capsys, data_dir):
    data = data_copy(data_dir, ["humaneval/HumanEval.jsonl.gz"], tmp_path / "data")
    lines = read_lines(data / "humaneval/HumanEval.jsonl.gz")
    write(data / "humaneval/HumanEval.jsonl.gz", "\n".join([dumps(dict(json.loads(lines[0]), test=5)),
                                                            *lines[1:]]).encode())
    out = tmp_path / "out"
    out.mkdir()
    (out / "results.json").write_text('{"earlier": true}')
    code, err = cli(capsys, "run", "--model", "reference", "--tasks", "humaneval", "--allow_code_execution",
                    "--data-dir", str(data), "--output-dir", str(out))
    assert code == 2 and len(err) == 1 and "record 0 is malformed: its 'test' is a int" in err[0], err
    assert sorted(p.name for p in out.iterdir()) == ["results.json"]
    assert (out / "results.json").read_text() == '{"earlier": true}'


@pytest.mark.parametrize("text,message", [FOUND_MODELS[0], FOUND_MODELS[4]])
def test_cli_nightly_refuses_a_bad_models_file_in_one_line(tmp_path, capsys, text, message):
    (tmp_path / "models.yaml").write_text(text)
    code, err = cli(capsys, "nightly", str(tmp_path / "models.yaml"), "--output-dir", str(tmp_path / "board"),
                    "--runs-dir", str(tmp_path / "runs"))
    assert code == 2 and len(err) == 1 and message in err[0], err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["models.yaml"]


@pytest.mark.parametrize("tasks,message", [("humaneval,,humaneval", "listed twice"), ("humaneval,\x00", "unknown task"),
                                           (" , ", "no task given")])
def test_cli_refuses_a_bad_task_list_in_one_line(tmp_path, capsys, tasks, message):
    code, err = cli(capsys, "run", "--model", "reference", "--tasks", tasks, "--allow_code_execution",
                    "--output-dir", str(tmp_path / "out"))
    assert code == 2 and len(err) == 1 and message in err[0], err
    assert not (tmp_path / "out").exists()
