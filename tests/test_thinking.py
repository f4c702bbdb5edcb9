"""Reasoning models: the thinking taken off every answer before post-processing, kept apart and
counted; an answer whose thinking never closed fails under a status of its own. Saved answers with
known verdicts score the same with and without their thinking (replay, through the flow, in
Docker); a local model whose chat template opens the thinking runs through generation and
execution; a server's separate reasoning field reaches the generations Parquet."""
from __future__ import annotations

import dataclasses
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pyarrow.parquet as pq
import pytest
from docker_env import ensure_images

from codeeval.cli import main
from codeeval.generation.prompts import thinking
from codeeval.generation.prompts.requests import to_output

KW = dict(mode="messages", fmt=None, eos=None, prompt="def add(a, b):\n", language="python")
ANSWER = "```python\ndef add(a, b):\n    return a + b\n```"


def test_the_thinking_comes_off_the_front_and_nothing_else_changes():
    first_try = "Let me try:\n```python\ndef add(a, b):\n    return a - b\n```\nNo, that subtracts."
    bare = to_output(ANSWER, 40, "stop", **KW)
    assert bare.raw == "\n    return a + b\n" and bare.thinking is None  # the code repeats the prompt
    out = to_output(f"<think>\n{first_try}\n</think>\n\n{ANSWER}", 40, "stop", **KW)
    assert out == dataclasses.replace(bare, thinking=f"\n{first_try}\n")
    # Qwen3's and R1's templates open the thinking in the prompt: only the closing tag is generated
    assert to_output(f"{first_try}</think>{ANSWER}", 40, "stop", **KW).thinking == first_try
    # ... and a local backend, which knows the prompt, reads an unclosed one as unfinished
    out = to_output("still thinking", 8, "length", **KW, opened="<think>")
    assert (out.finish_reason, out.raw, out.program, out.thinking) == (thinking.UNFINISHED, "", None, "still thinking")
    # a model that does not think: byte for byte what it was, for every mode
    for mode in ("messages", "answer", "plain", "chat"):
        kw = dict(KW, mode=mode)
        for text in (ANSWER, "    return a + b\n", "x = '<think>' in s\n", ""):
            assert to_output(text, 3, "eos", **kw) == to_output(text, 3, "eos", **kw, tags=None)
    # --reasoning keep leaves the thinking in the text; --thinking_tags names other tags
    kept = to_output(f"<think>{first_try}</think>{ANSWER}", 9, "stop", **KW, tags=None)
    assert kept.thinking is None and kept.raw == "\n    return a - b\n"  # the first block: the thinking's
    assert thinking.split("[[x]]y", thinking.parse_tags("[[|]]")) == thinking.Thought("y", "x")
    with pytest.raises(ValueError, match="'open|close'"):
        thinking.parse_tags("<think>")


def test_a_servers_reasoning_field_is_the_thinking():
    out = to_output(ANSWER, 50, "stop", **KW, reasoning="I add them.", thinking_tokens=41)
    assert out == dataclasses.replace(to_output(ANSWER, 50, "stop", **KW), thinking="I add them.", thinking_tokens=41)
    # the budget ran out while it thought: reasoning, no content
    out = to_output("", 64, "length", **KW, reasoning="First, ...")
    assert out.finish_reason == thinking.UNFINISHED and out.thinking == "First, ..."


def test_a_typo_in_the_reasoning_flags_is_one_line(data_dir, capsys):
    base = ["run", "--model", "reference", "--tasks", "humaneval", "--allow_code_execution", "--data-dir",
            str(data_dir)]
    assert main([*base, "--thinking_tags", "<think>"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "codeeval: error: --thinking_tags: '<think>' is not 'open|close' (e.g. '<think>|</think>')"]


def wrapped(program: str) -> str:
    """A reasoning model's answer around `program`: a wrong first try inside the thinking."""
    return ("<think>\nThe tests call the function. A first try:\n```python\ndef nothing():\n    pass\n```\n"
            "That defines the wrong name.\n</think>\n\nHere is the solution:\n\n```python\n" + program + "```\n")


@pytest.fixture(scope="module")
def saved_answers(data_dir, tmp_path_factory):
    """HumanEval 0-4: the canonical program and a wrong one, bare and as a thinking model's answers,
    plus an answer whose thinking never closed."""
    from codeeval.benchmarks.registry import get_task
    from codeeval.benchmarks.spec import LoadOptions

    problems = get_task("humaneval").load(LoadOptions(data_dir))[:5]
    right = [p.record["prompt"] + p.record["canonical_solution"] for p in problems]
    wrong = [p.record["prompt"] + "    return None\n" for p in problems]
    folder = tmp_path_factory.mktemp("saved")
    (folder / "bare.json").write_text(json.dumps([[r, w] for r, w in zip(right, wrong)]))
    (folder / "thought.json").write_text(json.dumps(
        [[wrapped(r), wrapped(w), "<think>\nFirst, the list. Then"] for r, w in zip(right, wrong)]))
    return folder


def replay(data_dir, path, out, *flags) -> dict:
    assert main(["run", "--model", "saved", "--tasks", "humaneval", "--limit", "5", "--load_generations_path",
                 str(path), "--allow_code_execution", "--data-dir", str(data_dir), "--output-dir", str(out),
                 *flags]) == 0
    return json.loads((out / "results.json").read_text())


def statuses(out) -> dict:
    rows = pq.read_table(out / "humaneval" / "executions" / "shard-00000.parquet").to_pylist()
    return {(r["task_id"], r["sample"]): (r["status"], r["passed"]) for r in rows}


def test_saved_answers_score_the_same_without_their_thinking(prefect_api, data_dir, saved_answers, tmp_path,
                                                             capsys):
    ensure_images()
    bare = replay(data_dir, saved_answers / "bare.json", tmp_path / "bare")
    thought = replay(data_dir, saved_answers / "thought.json", tmp_path / "thought")
    printed = capsys.readouterr().out
    plain, stripped = statuses(tmp_path / "bare"), statuses(tmp_path / "thought")
    assert sorted(set(plain.values())) == [("failed", False), ("passed", True)], plain  # both verdicts
    assert {k: v for k, v in stripped.items() if k[1] < 2} == plain
    assert {v for k, v in stripped.items() if k[1] == 2} == {(thinking.UNFINISHED, False)}
    summary = thought["codeeval"]["tasks"]["humaneval"]
    assert summary["passed"] == bare["codeeval"]["tasks"]["humaneval"]["passed"] == 5
    assert summary["statuses"][thinking.UNFINISHED] == 5
    assert summary["thinking"] == {"answers": 15, "thought": 15, "unfinished": 5, "thinking_tokens": 0,
                                   "answer_tokens": 0}
    assert "thinking" not in bare["codeeval"]["tasks"]["humaneval"]
    assert "thinking: 15 of 15 answers thought (0 thinking tokens, 0 answer tokens); 5 never finished " \
           "thinking (failed, status unfinished_thinking)" in printed
    rows = pq.read_table(tmp_path / "thought" / "humaneval" / "generations" / "shard-00000.parquet").to_pylist()
    assert all(r["thinking"].startswith("\nThe tests call") for r in rows if r["sample"] < 2)
    assert all(r["completion"] == "" and r["finish_reason"] == thinking.UNFINISHED for r in rows if r["sample"] == 2)
    # --reasoning keep: the saved text is the program, thinking and all, as bigcode runs it: none compiles
    kept = replay(data_dir, saved_answers / "thought.json", tmp_path / "kept", "--reasoning", "keep")
    kept_summary = kept["codeeval"]["tasks"]["humaneval"]
    assert kept_summary["passed"] == 0 and "thinking" not in kept_summary


THINKING_TEMPLATE = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
                     "{% if add_generation_prompt %}<|im_start|>assistant\n<think>\n"
                     "{% if enable_thinking is defined and enable_thinking is false %}\n</think>\n\n{% endif %}{% endif %}")


def test_a_local_model_whose_template_opens_the_thinking(prefect_api, data_dir, demo_model_dir, tmp_path, capsys):
    """The transformers backend with a chat template that thinks (the thinking opened in the prompt,
    as Qwen3's): a small model's few tokens never close it, so each answer is unfinished, counted
    with its tokens, and fails through execution in Docker."""
    import shutil

    model = tmp_path / "thinker"
    shutil.copytree(demo_model_dir, model)
    config = json.loads((model / "tokenizer_config.json").read_text())
    (model / "tokenizer_config.json").write_text(json.dumps({**config, "chat_template": THINKING_TEMPLATE}))
    for extra in ("chat_template.jinja", "chat_template.json"):
        (model / extra).unlink(missing_ok=True)
    ensure_images()
    out = tmp_path / "run"
    args = ["run", "--model", str(model), "--tasks", "humaneval", "--limit", "2", "--do_sample", "false",
            "--max_new_tokens", "8", "--apply_chat_template", "--chat_style", "free", "--allow_code_execution",
            "--data-dir", str(data_dir), "--output-dir", str(out)]
    assert main(args) == 0
    capsys.readouterr()
    rows = pq.read_table(out / "humaneval" / "generations" / "shard-00000.parquet").to_pylist()
    assert [r["finish_reason"] for r in rows] == [thinking.UNFINISHED] * 2
    assert all(r["thinking"] and r["thinking_tokens"] and r["completion"] == "" for r in rows)
    summary = json.loads((out / "results.json").read_text())["codeeval"]["tasks"]["humaneval"]
    assert summary["statuses"] == {thinking.UNFINISHED: 2} and summary["passed"] == 0
    assert summary["thinking"]["unfinished"] == 2 and summary["thinking"]["thinking_tokens"] > 0
    # --enable_thinking false: the template closes the thinking in the prompt (as Qwen3's), the model answers
    assert main([*args[:-1], str(tmp_path / "answered"), "--enable_thinking", "false"]) == 0
    capsys.readouterr()
    rows = pq.read_table(tmp_path / "answered" / "humaneval" / "generations" / "shard-00000.parquet").to_pylist()
    assert all(r["finish_reason"] != thinking.UNFINISHED and r["thinking"] is None for r in rows)
    summary = json.loads((tmp_path / "answered" / "results.json").read_text())["codeeval"]["tasks"]["humaneval"]
    assert thinking.UNFINISHED not in summary["statuses"] and "thinking" not in summary


class Reasoner(BaseHTTPRequestHandler):
    """vLLM with `--reasoning-parser`: the thinking in `reasoning_content`, the answer in `content`
    (a stream-less JSON body, as a server asked not to stream answers)."""

    requests = 0

    def do_POST(self):  # noqa: N802 - http.server's name
        type(self).requests += 1
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        assert body["chat_template_kwargs"] == {"enable_thinking": True} and body["reasoning_effort"] == "low"
        # --max_new_tokens is the answer's, --thinking_budget the thinking's: vLLM caps it, max_tokens holds both
        assert body["thinking_token_budget"] == 100 and body["max_tokens"] == 164
        answer = {"choices": [{"index": 0, "finish_reason": "stop", "message": {
            "role": "assistant", "reasoning_content": "Sum the two.",
            "content": "```python\ndef add(a, b):\n    return a + b\n```"}}],
            "usage": {"prompt_tokens": 30, "completion_tokens": 20,
                      "completion_tokens_details": {"reasoning_tokens": 4}}}
        data = json.dumps(answer).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


def test_a_servers_reasoning_content_reaches_the_generations(tmp_path):
    from test_chat import toy_task

    from codeeval.benchmarks.spec import Problem
    from codeeval.generation import BackendSpec, GenerationArgs
    from codeeval.generation.api.openai_backend import OpenAIBackend
    from codeeval.pipeline.generate import generate_rows

    server = ThreadingHTTPServer(("127.0.0.1", 0), Reasoner)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        spec = BackendSpec("openai", "m", GenerationArgs(do_sample=False, max_new_tokens=64, apply_chat_template=True,
                                                          thinking_budget=100, enable_thinking=True),
                           options=(("base_url", f"http://127.0.0.1:{server.server_port}/v1"),
                                    ("reasoning_effort", "low"), ("stream", "no")))
        task, problem = toy_task(), Problem("T/0", 0, "def add(a, b):\n", {})
        rows = generate_rows(task, [problem], [problem], {"T/0": 1}, OpenAIBackend(spec))
    finally:
        server.shutdown()
    assert Reasoner.requests == 1
    assert rows[0]["thinking"] == "Sum the two." and rows[0]["thinking_tokens"] == 4 and rows[0]["n_tokens"] == 20
    assert "return a + b" in rows[0]["completion"] and "Sum" not in rows[0]["completion"]
