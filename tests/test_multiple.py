"""MultiPL-E: tasks as bigcode loads and post-processes them, and every language's runner
through its real container (right and wrong bodies for two problems each, C#'s commented
signature, adversarial programs), the CLI end to end, and the compile sweep (slow)."""
from __future__ import annotations

import dataclasses
import json
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
from docker_env import REPO, ensure_images
from multiple_bodies import BODIES

from codeeval.benchmarks import multiple
from codeeval.benchmarks.data import read_jsonl
from codeeval.benchmarks.multiple.languages import LANGUAGES
from codeeval.benchmarks.registry import get_task
from codeeval.benchmarks.spec import LoadOptions
from codeeval.core.errors import UsageError
from codeeval.executors.docker import images
from codeeval.executors.docker.sandbox import DockerSandbox, SandboxUnavailable

RUNNABLE = sorted(LANGUAGES)


def ensure_multiple_images() -> None:
    ensure_images()
    done = subprocess.run(["bash", "codeeval/containers/multiple/build.sh"], cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 0, f"codeeval/containers/multiple/build.sh failed:\n{done.stdout}\n{done.stderr}"


@pytest.fixture(scope="module")
def boxes():
    """One sandbox per image (the bookworm one serves every language but Swift)."""
    ensure_multiple_images()
    with DockerSandbox(n_workers=2, runtime="multiple-cpp") as bookworm, \
            DockerSandbox(n_workers=1, runtime="multiple-swift") as trixie:
        yield {"bookworm": bookworm, "trixie": trixie}


def problems_of(name: str, data_dir) -> dict:
    return {p.task_id: p for p in get_task(name).load(LoadOptions(data_dir))}


def judge_all(boxes, jobs):
    """jobs: [(lang, task problem, completion)] -> [Verdict], run in the language's image."""
    verdicts = [None] * len(jobs)
    for suite, box in boxes.items():
        idx = [i for i, (lang, _, _) in enumerate(jobs) if (lang == "swift") == (suite == "trixie")]
        if not idx:
            continue
        programs = [dataclasses.replace(multiple.MultiplETests(jobs[i][0]).build(jobs[i][1], jobs[i][2]),
                                        key=f"{jobs[i][0]}:{i}") for i in idx]
        for i, outcome in zip(idx, box.run(programs)):
            lang, problem, _ = jobs[i]
            verdicts[i] = multiple.MultiplETests(lang).judge(problem, outcome)
    return verdicts


# -- tasks ---------------------------------------------------------------------------------
def test_every_language_and_variant_loads_with_the_records_stop_tokens(data_dir):
    for lang in multiple.LANGS:
        for name in (f"multiple-{lang}", f"multiple-{lang}-keep", f"multiple-mbpp-{lang}"):
            spec = get_task(name)
            problems = spec.load(LoadOptions(data_dir))
            source = multiple.parse(name)
            assert len(problems) == len(read_jsonl(data_dir / "multipl_e" / "prompts" / source.file)) > 150
            first = problems[0].record
            assert spec.stop_words == (*first["stop_tokens"], "<file_sep>")  # bigcode: the first row's + <file_sep>
            assert problems[0].prompt == first["prompt"].strip()
            assert spec.execution.runtime == f"multiple-{lang}"
    assert "multiple-cpp" in multiple.TASK_NAMES and "multiple-pl" in multiple.TASK_NAMES  # bigcode drops these
    assert len(get_task("multiple-cpp").load(LoadOptions(data_dir))) == 161


def test_postprocess_cuts_at_the_first_stop_token_and_keeps_the_prompt(data_dir):
    spec = get_task("multiple-cpp")
    problem = spec.load(LoadOptions(data_dir))[0]
    out = spec.postprocess(problem, "\n    return true;\n}\nint main() { junk }", ())
    assert out == problem.prompt + "\n    return true;"
    assert spec.postprocess(problem, "\n  x<file_sep>rest", ()) == problem.prompt + "\n  x"


def test_bad_input_is_one_clear_error(data_dir, tmp_path):
    with pytest.raises(UsageError, match="unknown task"):
        get_task("multiple-cobol")
    (tmp_path / "multipl_e" / "prompts").mkdir(parents=True)
    with pytest.raises(UsageError, match="humaneval-lua-reworded"):
        get_task("multiple-lua").load(LoadOptions(tmp_path))
    bad = tmp_path / "multipl_e" / "prompts" / "humaneval-lua-reworded.jsonl.gz"
    import gzip

    with gzip.open(bad, "wt") as fh:
        fh.write(json.dumps({"name": "x", "prompt": "p", "tests": "t", "stop_tokens": ["\nend"]}) + "\n")
    with pytest.raises(UsageError, match="stop tokens"):
        get_task("multiple-lua").load(LoadOptions(tmp_path))


def test_julia_is_reported_unavailable_not_skipped():
    with pytest.raises(images.RuntimeUnavailable, match="Julia has no Debian package"):
        images.runtime_image("multiple-jl")
    with pytest.raises(SandboxUnavailable, match="Julia"):
        DockerSandbox(runtime="multiple-jl")


def test_status_labels_follow_multipl_e_evaluators():
    """The labels of failing programs as MultiPL-E's eval_<lang>.py give them (checked against the
    upstream evaluator on the same programs: bench/multiple_reference.py, docs/multiple.md)."""
    from codeeval.benchmarks.multiple import languages as ml

    assert ml.js_rule(1, "", "ReferenceError: undefinedName is not defined") == "ReferenceError"
    assert ml.js_rule(1, "SyntaxError: Unexpected token", "") == "SyntaxError"  # js: both streams
    assert ml.ts_rule(1, "SyntaxError", "Error: no") == "Exception"  # ts: stderr only
    assert ml.r_rule(3, "", "") == "AssertionError" and ml.r_rule(1, "", "Error: unexpected ')'") == "SyntaxError"
    assert ml.rb_rule(1, "", "") == "Exception" and ml.rb_rule(1, "", "RuntimeError") == "SyntaxError"
    assert ml.elixir_rule(2, "Assertion with == failed", "") == "AssertionError"
    assert ml.ml_rule(2, "", "Error: Syntax error") == "SyntaxError"
    assert ml.cs_rule(3, "", "") == "OK"  # exit code ignored: bigcode's rule (OK and exit 0) still fails it


# -- runners through the real containers -----------------------------------------------------
def test_every_language_passes_right_bodies_and_fails_wrong_ones(boxes, data_dir):
    jobs, expect = [], []
    for lang in RUNNABLE:
        problems = problems_of(f"multiple-{lang}", data_dir)
        for name, (right, wrong) in BODIES[lang].items():
            for body, ok in ((right, True), (wrong, False)):
                jobs.append((lang, problems[name], problems[name].prompt + body))
                expect.append((lang, name, ok))
    verdicts = judge_all(boxes, jobs)
    wrong = [(e, v.status, v.detail) for e, v in zip(expect, verdicts) if v.passed is not e[2]]
    assert not wrong, wrong
    assert {lang for lang, _, _ in expect} == set(RUNNABLE) and len(RUNNABLE) == 21


def test_cs_prompts_comment_out_the_signature_so_a_bare_body_does_not_compile(boxes, data_dir):
    """Every humaneval-cs prompt has its method signature inside a `//` comment: a body-only
    completion is a compile error (MultiPL-E's SyntaxError); declaring the method passes."""
    problem = problems_of("multiple-cs", data_dir)["HumanEval_53_add"]
    assert problem.prompt.splitlines()[-1].strip() == "//     public static long Add(long x, long y) {"
    bare, declared = judge_all(boxes, [("cs", problem, problem.prompt + "\n        return x + y;\n"),
                                       ("cs", problem, problem.prompt + BODIES["cs"]["HumanEval_53_add"][0])])
    assert (bare.passed, declared.passed) == (False, True)
    assert "MultiPL-E status SyntaxError" in bare.detail


def test_adversarial_programs(boxes, data_dir):
    """A CPU loop ends at the language's limit (JavaScript: 5 s of CPU) as a timeout; a
    flood of output is capped and fails; a forked background process does not outlive its
    program; Racket passing with stderr noise fails (MultiPL-E: rackunit exits 0, so any stderr
    fails); a C++ program that exits 0 before its asserts passes, as MultiPL-E judges by the exit
    code alone (docs/deviations.md)."""
    js = problems_of("multiple-js", data_dir)["HumanEval_53_add"]
    sh = problems_of("multiple-sh", data_dir)["HumanEval_53_add"]
    rkt = problems_of("multiple-rkt", data_dir)["HumanEval_53_add"]
    cpp = problems_of("multiple-cpp", data_dir)["HumanEval_53_add"]
    jobs = [
        ("js", js, js.prompt + "\n  while (true) {}\n}\n"),
        ("sh", sh, sh.prompt + "\n    yes flood | head -c 200000000\n"),
        ("sh", sh, sh.prompt + "\n    (sleep 1000 >/dev/null 2>&1 &) ; echo $(( $1 + $2 ))\n"),
        ("rkt", rkt, rkt.prompt + "\n  (eprintf \"noise\") (+ x y))\n"),
        ("cpp", cpp, cpp.prompt + "\n    exit(0);\n"),
    ]
    started = time.monotonic()
    loop, flood, background, noisy, early = judge_all(boxes, jobs)
    # node's 5 s, on the step's clock and on the job's CPU
    assert loop.status == "Timeout" and not loop.passed and "Timeout" in loop.detail
    assert not flood.passed
    assert background.passed
    assert not noisy.passed and "Exception" in noisy.detail
    assert early.passed
    assert time.monotonic() - started < 120


def test_run_scores_only_its_own_programs_whatever_tmp_holds(prefect_api, data_dir, tmp_path, capsys):
    """bigcode globs every `*.results.json` in the system temp dir into the score; a stale one
    there (all samples OK) changes nothing here, and nothing is written there. Two tasks in one
    run use their own images (Lua: bookworm, Swift: trixie)."""
    from codeeval.cli import main

    stale = Path(tempfile.gettempdir()) / "HumanEval_0_has_close_elements.results.json"
    stale.write_text(json.dumps({"name": "HumanEval_0_has_close_elements", "language": "lua",
                                 "results": [{"status": "OK", "exit_code": 0}] * 4}))
    right = ("\n    for i = 1, #numbers do\n        for j = 1, #numbers do\n"
             "            if i ~= j and math.abs(numbers[i] - numbers[j]) < threshold then return true end\n"
             "        end\n    end\n    return false\nend\n")
    swift = ("\n    for i in 0..<numbers.count {\n        for j in 0..<numbers.count {\n"
             "            if i != j && abs(numbers[i] - numbers[j]) < threshold { return true }\n"
             "        }\n    }\n    return false\n")
    problem = get_task("multiple-lua").load(LoadOptions(data_dir))[0]
    (tmp_path / "generations_multiple-lua.json").write_text(
        json.dumps([[problem.prompt + right, problem.prompt + "\n    return true\nend\n"]]))
    problem = get_task("multiple-swift").load(LoadOptions(data_dir))[0]
    (tmp_path / "generations_multiple-swift.json").write_text(
        json.dumps([[problem.prompt + swift, problem.prompt + swift, problem.prompt + "\n    return true\n"]]))
    gens = tmp_path / "generations.json"
    before = set(Path(tempfile.gettempdir()).glob("*.results.json")) - {stale}
    try:
        assert main(["run", "--tasks", "multiple-lua,multiple-swift", "--load_generations_path", str(gens),
                     "--limit", "1",
                     "--allow_code_execution", "--data-dir", str(data_dir), "--output-dir", str(tmp_path / "out")]) == 0
    finally:
        stale.unlink()
    capsys.readouterr()
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    assert results["multiple-lua"] == {"pass@1": 0.5}
    assert results["multiple-swift"]["pass@1"] == pytest.approx(2 / 3)
    assert set(Path(tempfile.gettempdir()).glob("*.results.json")) == before


def test_samples_file_rows_continue_the_unstripped_prompt_and_the_log_keeps_multipl_e_s_words(
        prefect_api, data_dir, tmp_path, capsys):
    """`{"task_id", "completion"}` rows (the body after MultiPL-E's own, unstripped prompt) through
    the CLI: the executions Parquet holds MultiPL-E's status word and the program's own exit code
    (Rust: a panic exits 101, rustc's refusal 1, a timeout none), and results.json counts the words."""
    import pyarrow.parquet as pq

    from codeeval.cli import main

    ensure_multiple_images()
    problem = problems_of("multiple-rs", data_dir)["HumanEval_53_add"]
    right, wrong = BODIES["rs"]["HumanEval_53_add"]
    bodies = [right, wrong, "\n    x +\n", "\n    loop {}\n"]
    saved = tmp_path / "samples.jsonl"
    saved.write_text("".join(json.dumps({"task_id": problem.task_id, "completion": b}) + "\n" for b in bodies))
    out = tmp_path / "out"
    assert main(["run", "--tasks", "multiple-rs", "--load_generations_path", str(saved), "--limit_start",
                 str(problem.index), "--limit", "1", "--n_samples", "4", "--allow_code_execution",
                 "--data-dir", str(data_dir), "--output-dir", str(out)]) == 0
    capsys.readouterr()
    rows = sorted(pq.read_table(out / "multiple-rs" / "executions").to_pylist(), key=lambda r: r["sample"])
    assert [(r["status"], r["exit_code"], r["passed"]) for r in rows] == [
        ("OK", 0, True), ("Exception", 101, False), ("SyntaxError", 1, False), ("Timeout", None, False)]
    task = json.loads((out / "results.json").read_text())["codeeval"]["tasks"]["multiple-rs"]
    assert task["statuses"] == {"Exception": 1, "OK": 1, "SyntaxError": 1, "Timeout": 1}


def test_cli_refuses_julia_at_once(data_dir, tmp_path, capsys):
    from codeeval.cli import main

    gens = tmp_path / "g.json"
    gens.write_text(json.dumps([["x"]]))
    started = time.monotonic()
    code = main(["run", "--tasks", "multiple-jl", "--load_generations_path", str(gens), "--limit", "1",
                 "--allow_code_execution", "--data-dir", str(data_dir), "--output-dir", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2 and "Julia has no Debian package" in err and len(err.strip().splitlines()) == 1
    assert time.monotonic() - started < 30


# -- the compile sweep (slow): every problem's tests compile with a failing body -------------
FAILING_BODY = {  # fails at run time whatever the return type
    "cs": "\n        throw new Exception(\"no\");\n",  # after the signature, uncommented
    "d": "\n{\n    assert(0);\n}\n",
    "go": "\n    panic(\"no\")\n}\n",
    "rs": "\n    panic!(\"no\")\n",
    "swift": "\n    fatalError(\"no\")\n",
    "ts": "\n  throw new Error(\"no\");\n}\n",
}
# Every n-th problem only (and the known exceptions), to keep CI short: a Go test ~2 s of CPU
# with a cold build cache, tsc ~4-6 s, swiftc ~1 s (docs/multiple.md).
SWEEP_STRIDE = {"go": 3, "swift": 4, "ts": 10}
# Suites that can never compile (notes/multiple.md): Go's HumanEval_87 test uses []interface{} as [][]int.
NEVER_COMPILE = {("go", "HumanEval_87_get_row")}


def failing_completion(lang: str, prompt: str) -> str:
    if lang == "cs":  # the signature is the prompt's last line, inside a comment
        head, _, signature = prompt.rpartition("\n")
        return head + "\n" + signature.replace("//", "", 1) + FAILING_BODY[lang]
    return prompt + FAILING_BODY[lang]


@pytest.mark.slow
@pytest.mark.parametrize("lang", sorted(FAILING_BODY))
def test_sweep_every_problem_compiles_with_a_failing_body(boxes, data_dir, lang):
    """The notes' sweep on these toolchains (Mono's mcs, ldc, Go 1.19, rustc 1.63, Swift 6.0,
    tsc 4.8): every problem's tests compile; the failing body then fails at run time (Exception),
    never a SyntaxError (but for the suites known never to compile, which must say so)."""
    problems = [p for i, p in enumerate(problems_of(f"multiple-{lang}", data_dir).values())
                if i % SWEEP_STRIDE.get(lang, 1) == 0 or (lang, p.task_id) in NEVER_COMPILE]
    verdicts = judge_all(boxes, [(lang, p, failing_completion(lang, p.prompt)) for p in problems])
    assert not any(v.passed for v in verdicts)
    expected = {p.task_id: "SyntaxError" if (lang, p.task_id) in NEVER_COMPILE else "Exception" for p in problems}
    wrong = [(p.task_id, v.detail) for p, v in zip(problems, verdicts)
             if f"status {expected[p.task_id]}," not in v.detail]
    assert not wrong, wrong
