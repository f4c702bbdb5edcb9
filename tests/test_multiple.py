"""MultiPL-E: tasks as bigcode loads and post-processes them, and every language's runner
through its real container (right and wrong bodies for two problems each, C#'s commented
signature, adversarial programs), the CLI end to end, and the compile sweep (slow)."""
from __future__ import annotations

import dataclasses
import json
import subprocess
import tempfile
import time

import pytest
from docker_env import REPO, ensure_images
from multiple_bodies import BODIES

from codeeval.benchmarks import multiple
from codeeval.benchmarks.registry import get_task
from codeeval.benchmarks.spec import LoadOptions
from codeeval.errors import UsageError
from codeeval.executors import images
from codeeval.executors.docker_sandbox import DockerSandbox, SandboxUnavailable
from codeeval.executors.multiple.languages import LANGUAGES

RUNNABLE = sorted(LANGUAGES)


def ensure_multiple_images() -> None:
    ensure_images()
    done = subprocess.run(["bash", "containers/multiple/build.sh"], cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 0, f"containers/multiple/build.sh failed:\n{done.stdout}\n{done.stderr}"


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
            assert len(problems) > 150 if "mbpp" not in name else len(problems) > 390
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
