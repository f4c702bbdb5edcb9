"""MultiPL-E without --data-dir: the tasks load `nuprl/MultiPL-E` (the id bigcode and MultiPL-E
use) through `datasets`. With no hub, a copy in datasets' own cache (the layout a hub load
leaves: `<HF_HOME>/datasets/nuprl___multi_pl-e/<config>/0.0.0/<sha>/`) loads offline; with
neither, the CLI says so in one line within seconds. Each runs in a fresh interpreter so that
huggingface_hub and datasets read this test's environment (they read it once, at import)."""
from __future__ import annotations

import http.server
import json
import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from codeeval.benchmarks.registry import get_task
from codeeval.benchmarks.spec import LoadOptions

NO_HUB = "http://127.0.0.1:9"  # the discard port: nothing listens, the connection is refused at once


def env_for(hf_home: Path, endpoint: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGINGFACE_"))}
    return {**env, "HF_HOME": str(hf_home), "HF_ENDPOINT": endpoint, "NO_PROXY": "*"}


def python(code: str, env: dict, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env, capture_output=True, text=True,
                          timeout=timeout)


def write_datasets_cache(hf_home: Path, prompts: Path, config: str) -> None:
    """What `load_dataset("nuprl/MultiPL-E", config)` leaves in datasets' cache, built by datasets'
    own JSON builder from the local prompt file (a hub builder names its folders after the
    dataset's name, a local one after the data files' hash: renamed to match)."""
    done = python(f"""
        from pathlib import Path
        from datasets.packaged_modules.json.json import Json
        b = Json(dataset_name="nuprl___multi_pl-e", config_name={config!r}, hash="0" * 40,
                 data_files={{"test": {str(prompts)!r}}})
        b.download_and_prepare()
        root = Path(b.cache_dir).parents[1]
        root.rename(root.with_name({config!r}))
        arrow = next(root.with_name({config!r}).glob("*/*/nuprl___multi_pl-e-test.arrow"))
        arrow.rename(arrow.with_name("multi_pl-e-test.arrow"))
    """, env_for(hf_home, NO_HUB))
    assert done.returncode == 0, done.stderr[-3000:]


def test_loads_the_hub_dataset_from_the_datasets_cache_without_the_hub(tmp_path, data_dir):
    hf_home = tmp_path / "hf"
    write_datasets_cache(hf_home, data_dir / "multipl_e" / "prompts" / "humaneval-lua-reworded.jsonl.gz",
                         "humaneval-lua")
    started = time.monotonic()
    done = python("""
        import json
        from codeeval.benchmarks.registry import get_task
        from codeeval.benchmarks.spec import LoadOptions
        problems = get_task("multiple-lua").load(LoadOptions(None))
        print(json.dumps([[p.task_id, p.prompt, p.record["tests"]] for p in problems]))
    """, env_for(hf_home, NO_HUB))
    assert done.returncode == 0, done.stderr[-3000:]
    assert time.monotonic() - started < 60
    local = get_task("multiple-lua").load(LoadOptions(data_dir))
    assert json.loads(done.stdout) == [[p.task_id, p.prompt, p.record["tests"]] for p in local]
    assert len(local) == 161
    # the other configs are not there: asking for one is a clear error, not a hang
    done = python("""
        from codeeval.benchmarks.registry import get_task
        from codeeval.benchmarks.spec import LoadOptions
        get_task("multiple-rb").load(LoadOptions(None))
    """, env_for(hf_home, NO_HUB))
    assert done.returncode != 0 and "humaneval-rb" in done.stderr


@pytest.fixture
def hub_that_serves_nothing():
    """A real HTTP server on localhost answering 404 to everything (what an intercepting
    gateway or a mirror without the dataset does): the hub "answers", but has no data."""
    class NotFound(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            self.send_error(404)

        do_HEAD = do_GET

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), NotFound)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_no_hub_and_no_cache_is_one_line_within_seconds(tmp_path, hub_that_serves_nothing):
    """Refused (no hub) and answering with nothing (a 404 server): both one line naming the
    dataset and --data-dir, exit code 2, within seconds (datasets retries nothing)."""
    gens = tmp_path / "generations.json"
    gens.write_text(json.dumps([["x"]]))
    codeeval = Path(sys.executable).with_name("codeeval")
    for endpoint, why in ((NO_HUB, "unreachable"), (hub_that_serves_nothing, "could not be loaded")):
        started = time.monotonic()
        done = subprocess.run([str(codeeval), "run", "--tasks", "multiple-lua", "--load_generations_path", str(gens),
                               "--allow_code_execution", "--output-dir", str(tmp_path / "out")],
                              env=env_for(tmp_path / "empty-hf", endpoint), capture_output=True, text=True, timeout=120)
        elapsed = time.monotonic() - started
        lines = done.stderr.strip().splitlines()
        assert done.returncode == 2 and len(lines) == 1, done.stderr[-3000:]
        assert "nuprl/MultiPL-E" in lines[0] and why in lines[0] and "--data-dir" in lines[0], lines[0]
        assert "multipl_e/prompts/humaneval-lua-reworded.jsonl.gz" in lines[0]
        assert elapsed < 30, (endpoint, elapsed)
