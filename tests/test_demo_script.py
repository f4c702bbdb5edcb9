"""scripts/demo.sh (`make demo`) without running it: the script parses, and its step 4 slices
name registered tasks that need only the Python image and have their problems in the data dir
the script assembles (../shared/data beside the APPS and ruHumanEval test fixtures)."""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

from codeeval.benchmarks.registry import get_task
from codeeval.benchmarks.spec import LoadOptions
from codeeval.executors.docker.images import PYTHON_RUNTIMES

REPO = Path(__file__).resolve().parents[1]
DEMO = REPO / "scripts" / "demo.sh"


def setting(name: str) -> str:
    match = re.search(rf"^{name}=(\S+)$", DEMO.read_text(), re.M)
    assert match, f"{name}= not found in {DEMO}"
    return match.group(1)


def test_the_demo_parses():
    assert subprocess.run(["bash", "-n", str(DEMO)], capture_output=True, text=True).returncode == 0


def test_every_slice_runs_on_the_python_image_from_the_demos_data(data_dir, tmp_path):
    slices = setting("slices").split(",")
    n = int(re.fullmatch(r'"\$\{SLICE_PROBLEMS:-(\d+)\}"', setting("slice_n")).group(1))
    assert len(slices) == 9 and 2 <= n <= 5
    # the demo's links: every entry of the data dir, then the two fixture folders
    for entry in data_dir.iterdir():
        (tmp_path / entry.name).symlink_to(entry)
    for name in ("apps", "ruhumaneval"):
        (tmp_path / name).unlink(missing_ok=True)
        (tmp_path / name).symlink_to(REPO / "tests" / "fixtures" / name)
    for name in slices:
        spec = get_task(name)
        assert spec.execution is None or spec.execution.runtime in PYTHON_RUNTIMES, name
        assert len(spec.load(LoadOptions(tmp_path))) >= n, name


def test_the_classification_step_runs_on_the_fixtures():
    """Step 5's tasks classify, and the fixtures hold enough test records for its slice."""
    text = DEMO.read_text()
    tasks = re.search(r"classify=\(--tasks (\S+) --data-dir (\S+)", text)
    n = int(re.fullmatch(r'"\$\{CLASSIFY_TEST:-(\d+)\}"', setting("classify_test")).group(1))
    assert tasks and tasks.group(2) == "tests/fixtures/classification"
    for name in tasks.group(1).split(","):
        spec = get_task(name)
        assert spec.classification is not None
        assert len(spec.load(LoadOptions(REPO / tasks.group(2)))) >= n, name
