"""The openai backend against a real OpenAI-compatible server: `transformers serve` (transformers' own
FastAPI app behind /v1/completions and /v1/chat/completions) on SmolLM2-135M-Instruct, on 127.0.0.1.
One server for the module. Requests are counted at the server, in its own log: it logs
"[Request received]" for every request it takes, before it computes it.

The server computes one request at a time (no continuous batching), so a request waits there for
every one sent before it: with 8 sent at once the last waits ~8 answers, longer than the 3 s timeout
the runs below give, which is the case of issue 36 (a slow server flooded with copies).
BUDGET new tokens a request: the module takes about 140 s of CPU (server included), 3.6 minutes of wall
time on the 2-core development machine at load 4.7."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from procs import alive, children
from team_server import free_port

from codeeval.benchmarks.registry import get_task
from codeeval.benchmarks.spec import LoadOptions
from codeeval.core import artifacts
from codeeval.core.results import RunResults
from codeeval.generation import BackendSpec, GenerationArgs
from codeeval.generation.api.journal import Journal
from codeeval.generation.api.openai_backend import OpenAIBackend
from codeeval.generation.base import CallContext
from codeeval.generation.hf.transformers_backend import TransformersBackend
from codeeval.pipeline.generate import generate_rows

REPO = Path(__file__).resolve().parents[1]
BUDGET = 48
N_EQUAL = 16  # the first HumanEval problems, greedy through the server and through the transformers backend
N_RUN = 8  # the runs' --limit
RECEIVED = "[Request received]"


class Served:
    def __init__(self, url: str, log: Path, proc: subprocess.Popen):
        self.url, self.log, self.proc = url, log, proc

    def count(self) -> int:
        """Requests the server took so far."""
        return self.log.read_text(errors="replace").count(RECEIVED)


@pytest.fixture(scope="module")
def smollm2_hf(smollm2_dir) -> str:
    """SmolLM2 as an HF directory (`transformers serve` cannot load this GGUF): made once in .cache."""
    done = subprocess.run([sys.executable, str(REPO / "scripts" / "fetch-smollm2.py"), "--hf"], capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip()


@pytest.fixture(scope="module")
def served(smollm2_hf, tmp_path_factory):
    log = tmp_path_factory.mktemp("server") / "server.log"
    port = free_port()
    cmd = [sys.executable, "-c", "from transformers.cli.transformers import main; main()", "serve", smollm2_hf,
           "--host", "127.0.0.1", "--port", str(port), "--dtype", "float32"]
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                                env={**os.environ, "OMP_WAIT_POLICY": "PASSIVE"})
    try:
        deadline = time.monotonic() + 180
        while True:
            assert proc.poll() is None, f"transformers serve ended: {log.read_text()[-3000:]}"
            assert time.monotonic() < deadline, f"transformers serve did not answer in 180 s: {log.read_text()[-3000:]}"
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2):
                    break
            except OSError:
                time.sleep(0.5)
        yield Served(f"http://127.0.0.1:{port}/v1", log, proc)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="module")
def humaneval(data_dir):
    task = get_task("humaneval")
    return task, task.load(LoadOptions(data_dir=data_dir))


def both_ways(served, smollm2_hf, humaneval, **generation):
    """(transformers backend rows, server rows, requests the server took, the call's usage)."""
    task, problems = humaneval
    chosen = problems[:N_EQUAL]
    counts = {p.task_id: 1 for p in chosen}
    args = GenerationArgs(do_sample=False, max_new_tokens=BUDGET, **generation)
    local = generate_rows(task, problems, chosen, counts, TransformersBackend(BackendSpec("transformers", smollm2_hf,
                                                                                          args)))
    before, context = served.count(), CallContext()
    backend = OpenAIBackend(BackendSpec("openai", smollm2_hf, args, options=(("base_url", served.url),)))
    remote = generate_rows(task, problems, chosen, counts, backend, context=context)
    return local, remote, served.count() - before, context.usage


def test_greedy_through_the_server_is_the_transformers_backends(served, smollm2_hf, humaneval):
    """/v1/completions: each of the 16 completions (prompt + continuation cut at the first stop word, what
    runs) is the transformers backend's, and the server took one request per prompt."""
    local, remote, took, usage = both_ways(served, smollm2_hf, humaneval)
    same = sum(a["completion"] == b["completion"] for a, b in zip(local, remote))
    print(f"completions endpoint: {same}/{N_EQUAL} equal; the server took {took} requests; {usage}")
    assert same == N_EQUAL, [(a["task_id"], a["raw"], b["raw"]) for a, b in zip(local, remote) if a != b]
    assert took == N_EQUAL and usage["requests_sent"] == N_EQUAL and usage["timeouts"] == usage["retries"] == 0
    assert usage["prompt_tokens"] > 0 and 0 < usage["completion_tokens"] <= N_EQUAL * BUDGET


def test_the_chat_endpoint_is_the_chat_template(served, smollm2_hf, humaneval):
    """/v1/chat/completions: the server applies the model's chat template to the instruction; the
    transformers backend with --apply_chat_template --chat_style free renders the same turn, and the
    program from each answer's first code block is the same."""
    local, remote, took, usage = both_ways(served, smollm2_hf, humaneval, apply_chat_template=True, chat_style="free")
    same = sum(a["completion"] == b["completion"] for a, b in zip(local, remote))
    print(f"chat endpoint: {same}/{N_EQUAL} equal; the server took {took} requests; {usage}")
    assert same == N_EQUAL, [(a["task_id"], a["raw"], b["raw"]) for a, b in zip(local, remote) if a != b]
    assert took == N_EQUAL


def run_command(served, model: str, data_dir: Path, out: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "codeeval", "run", "--model", model, "--backend", "openai", "--base_url", served.url,
            "--tasks", "humaneval", "--limit", str(N_RUN), "--do_sample", "False", "--max_new_tokens", str(BUDGET),
            "--backend_option", "timeout_s=3", "--allow_code_execution", "--executor", "local",
            "--data-dir", str(data_dir), "--output-dir", str(out), *extra]


def run_env(storage: Path) -> dict:
    return {**os.environ, "CODEEVAL_STORAGE": str(storage)}


def finished(out: Path, task: str = "humaneval") -> tuple[dict, list]:
    text = (out / "results.json").read_text()
    results = json.loads(text)
    assert json.dumps(RunResults.from_json(results).to_json(), indent=2) + "\n" == text  # `api` included
    rows = sorted((r["task_id"], r["completion"]) for p in sorted((out / task / "generations").glob("*.parquet"))
                  for r in artifacts.read_rows(p))
    return results, rows


@pytest.fixture(scope="module")
def uninterrupted(served, smollm2_hf, data_dir, tmp_path_factory):
    """One run of 8 prompts sent 8 at once, its timeout (3 s) shorter than the last one's wait."""
    root = tmp_path_factory.mktemp("uninterrupted")
    before = served.count()
    done = subprocess.run(run_command(served, smollm2_hf, data_dir, root / "run"), env=run_env(root / "storage"),
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return root, served.count() - before, done.stderr, finished(root / "run")


def test_a_slow_server_is_waited_for_not_flooded(uninterrupted):
    root, took, stderr, (results, _) = uninterrupted
    api = results["codeeval"]["tasks"]["humaneval"]["api"]
    print(f"the server took {took} requests for {N_RUN} prompts; {api}")
    assert took == N_RUN, stderr[-3000:]
    assert api["requests_sent"] == api["answered"] == N_RUN and api["from_journal"] == 0
    assert api["timeouts"] == api["retries"] == 0
    assert api["wall_s"] > 3  # all 8 were sent at once: the last one was waited for longer than the timeout
    assert api["concurrency"][1] < api["concurrency"][0] == 8  # and concurrency backed off
    assert api["prompt_tokens"] > 0 and api["completion_tokens"] > 0 and api["completion_tokens_per_s"] > 0
    cost = [line for line in stderr.splitlines() if f"api: {N_RUN} requests sent, 0 answered from the journal" in line]
    assert cost, stderr[-3000:]
    assert "requests at once (was 8)" in stderr  # the back-off said in one line


def test_the_same_command_again_reuses_its_shards_and_says_what_they_cost(served, smollm2_hf, data_dir,
                                                                          uninterrupted):
    root, _, _, (first, rows) = uninterrupted
    before = served.count()
    done = subprocess.run(run_command(served, smollm2_hf, data_dir, root / "run"), env=run_env(root / "storage"),
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    results, again = finished(root / "run")
    api, paid = results["codeeval"]["tasks"]["humaneval"]["api"], first["codeeval"]["tasks"]["humaneval"]["api"]
    assert served.count() == before and again == rows
    assert api["requests_sent"] == api["from_journal"] == 0 and api["reused"] == N_RUN
    assert (api["prompt_tokens"], api["completion_tokens"]) == (paid["prompt_tokens"], paid["completion_tokens"])
    assert f"api: 0 requests sent, 0 answered from the journal, {N_RUN} in reused shards" in done.stderr


def test_another_task_list_over_the_same_prompts_sends_nothing(served, smollm2_hf, data_dir, uninterrupted):
    """humanevalplus's first prompts are HumanEval's: a new run over the same storage is answered
    from the journal."""
    root = uninterrupted[0]
    before = served.count()
    cmd = [*run_command(served, smollm2_hf, data_dir, root / "plus"), "--generation_only"]
    cmd[cmd.index("--tasks") + 1] = "humanevalplus"
    done = subprocess.run(cmd, env=run_env(root / "storage"), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    results, rows = finished(root / "plus", "humanevalplus")
    api = results["codeeval"]["tasks"]["humanevalplus"]["api"]
    assert served.count() == before and api["requests_sent"] == 0 and api["from_journal"] == N_RUN
    assert rows == uninterrupted[3][1]


def test_a_killed_run_sends_again_only_what_was_never_answered(served, smollm2_hf, data_dir, uninterrupted,
                                                              tmp_path):
    """SIGKILL once 3 answers are journaled, then the same command: the two runs send the 8 requests
    plus those in flight at the kill, the second exactly those never answered, and end as the
    uninterrupted run did."""
    storage, out = tmp_path / "storage", tmp_path / "run"
    cmd, env = run_command(served, smollm2_hf, data_dir, out), run_env(storage)
    before = served.count()

    def journaled() -> int:
        folders = list((storage / "requests").glob("*"))
        return len(Journal(folders[0]).answers) if folders else 0

    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 240
        while journaled() < 3:
            assert proc.poll() is None and time.monotonic() < deadline, "the run ended, or answered nothing"
            time.sleep(0.05)
        tree = children(proc.pid) | {proc.pid}
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    deadline = time.monotonic() + 15
    while alive(tree) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not alive(tree), f"processes of the killed run left: {alive(tree)}"
    time.sleep(1.0)  # what was on its way reaches the server's log
    first, kept = served.count() - before, journaled()
    in_flight = first - kept
    assert not (out / "results.json").exists() and kept < N_RUN

    again = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr[-3000:]
    second = served.count() - before - first
    print(f"killed run: {first} requests sent, {kept} answered and journaled, {in_flight} in flight at the kill; "
          f"the re-run sent {second}")
    assert second == N_RUN - kept
    assert first + second <= N_RUN + in_flight
    results, rows = finished(out)
    reference, reference_rows = uninterrupted[3]
    assert rows == reference_rows
    assert results["humaneval"] == reference["humaneval"]
    api = results["codeeval"]["tasks"]["humaneval"]["api"]
    assert api["from_journal"] == kept and api["requests_sent"] == second
