"""Instruction tokens, the chat-template path, code-block extraction and FIM prompts."""
from __future__ import annotations

import pytest

from codeeval.benchmarks.spec import Problem, Prompting, TaskSpec
from codeeval.generation import BackendSpec, GenerationArgs, GenRequest
from codeeval.generation.hf.transformers_backend import TransformersBackend
from codeeval.generation.prompts import chat, fim
from codeeval.generation.prompts.requests import Job, plan_jobs, to_output
from codeeval.generation.prompts.stopping import ends

PROMPT = 'def add(a, b):\n    """Return a + b."""\n'


def toy_task(extra=None):
    return TaskSpec("toy", "toy", lambda o: [], ("\ndef",), lambda p, r, e: p.prompt + r, lambda p: "", (),
                    prompting=Prompting(**(extra or {})))



def test_instruction_tokens_follow_bigcode():
    args = GenerationArgs(prefix="P:", instruction_tokens="<user>,<end>,<assistant>")
    task = toy_task({"instruction": lambda p: ("Write add.", "def add(")})
    r = chat.render(PROMPT, args, task, None)
    assert r.text == "P:<user>Write add.<end><assistant>def add(" and r.mode == "instruction"
    assert chat.parse_instruction_tokens("<|user|>\\n,<|end|>\\n,<|assistant|>\\n") == (
        "<|user|>\n", "<|end|>\n", "<|assistant|>\n")
    with pytest.raises(ValueError):
        chat.parse_instruction_tokens("a,b")
    # a plain completion task: the answer is pre-filled with a fence and the prompt
    r = chat.render(PROMPT, GenerationArgs(instruction_tokens="U,E,A"), toy_task(), None)
    assert r.text.endswith("A```python\n" + PROMPT) and PROMPT.rstrip() in r.text.split("E", 1)[0]
    assert chat.render(PROMPT, GenerationArgs(prefix="# x\n"), toy_task(), None).text == "# x\n" + PROMPT


def test_finish_continuation_cuts_the_closing_fence():
    assert chat.finish_continuation("    return a + b\n```\nMore text", "chat") == "    return a + b\n"
    assert chat.finish_continuation("x```", "plain") == "x```"


def test_extract_code():
    answer = "Here:\n```js\nlet x;\n```\nand\n```python\ndef f():\n    return 1\n```\n"
    assert chat.extract_code(answer) == "def f():\n    return 1\n"
    assert chat.extract_code("```\nprint(1)\n```") == "print(1)\n"
    assert chat.extract_code("no fence at all") == "no fence at all"
    assert chat.extract_code("```python\nunterminated = 1\n") == "unterminated = 1\n"
    raw, program = chat.answer_to_output(PROMPT, "```python\n" + PROMPT + "    return a + b\n```")
    assert program is None and (PROMPT + raw).endswith("return a + b\n")
    raw, program = chat.answer_to_output("from typing import List\n\ndef f(x: List[int]):\n",
                                         "```python\ndef f(xs):\n    return xs\n```")
    assert raw is None and program == "from typing import List\ndef f(xs):\n    return xs\n"


def test_chat_template_path_through_the_transformers_backend(demo_model_dir):
    args = GenerationArgs(do_sample=False, max_new_tokens=24, apply_chat_template=True)
    b = TransformersBackend(BackendSpec("transformers", demo_model_dir, args))
    problem = Problem("T/0", 0, PROMPT, {})
    task = toy_task()
    req = GenRequest("T/0", 0, PROMPT, task.stop_words + (b.eos_text(),))
    rendered, fmt = b.renderer.render(task, problem, req.prompt)
    assert fmt is None and rendered.mode == "chat" and not rendered.add_special_tokens
    assert rendered.text.startswith("<|im_start|>user\n")
    assert rendered.text.endswith("<|im_end|>\n<|im_start|>assistant\n```python\n" + PROMPT)
    out = b.generate(task, [problem], [req])[0]
    assert "```" not in out.raw and out.finish_reason in ("stop", "eos", "length")
    # a tokenizer without a template is an error, not a silent plain prompt
    b.tokenizer.chat_template = None
    with pytest.raises(ValueError, match="chat template"):
        b.generate(task, [problem], [req])


def test_free_chat_style_prefills_nothing_and_recovers_the_program():
    task = toy_task()
    free = GenerationArgs(instruction_tokens="U,E,A", chat_style="free")
    r = chat.render(PROMPT, free, task, None)
    assert r.mode == "answer" and r.text.endswith("A") and r.context == "" and PROMPT.rstrip() in r.text
    with pytest.raises(ValueError, match="--chat_style"):
        chat.render(PROMPT, GenerationArgs(instruction_tokens="U,E,A", chat_style="fence"), task, None)
    assert chat.answer_complete("Sure:\n```python\nx = 1\n```") and not chat.answer_complete("```python\nx = 1\n")
    kw = dict(mode="answer", fmt=None, eos=None, prompt=PROMPT, language="python")
    # the answer repeats the prompt: the rest is a continuation (the task's post-processing applies)
    out = to_output("Here:\n```python\n" + PROMPT + "    return a + b\n```\nDone.", 9, "stop", **kw)
    assert out.program is None and out.raw == "\n    return a + b\n" and out.n_tokens == 9
    # it does not: the block is the program, the raw answer is kept for inspection
    answer = "```python\ndef add(a, b):\n    return a + b\n```"
    out = to_output(answer, 9, "stop", **kw)
    assert out.program == "def add(a, b):\n    return a + b\n" and out.raw == answer
    # an answer without a fence that ended at eos: the eos text is not part of the program
    out = to_output("def add(a, b):\n    return a + b\n<|im_end|>", 9, "eos", **dict(kw, eos="<|im_end|>"))
    assert out.program == "def add(a, b):\n    return a + b\n"
    # a pre-filled continuation is only cut at its closing fence
    assert to_output("    return 1\n```\nmore", 3, "stop", **dict(kw, mode="chat")).raw == "    return 1\n"


def test_a_free_answer_ends_when_its_first_code_block_closes(demo_model_dir):
    args = GenerationArgs(do_sample=False, max_new_tokens=6, apply_chat_template=True, chat_style="free")
    b = TransformersBackend(BackendSpec("transformers", demo_model_dir, args))
    task, problem = toy_task(), Problem("T/0", 0, PROMPT, {})
    req = GenRequest("T/0", 0, PROMPT, task.stop_words + (b.eos_text(),))
    rendered, _ = b.renderer.render(task, problem, PROMPT)
    assert rendered.mode == "answer" and rendered.text.endswith("<|im_start|>assistant\n")
    jobs, _ = plan_jobs(task, [problem], [req], b.renderer, b._encode, b._budget, dedupe=True)
    assert jobs[0].stops == () and jobs[0].watch == ("```",)  # the task's stop words cut continuations only
    ids = lambda text: b.tokenizer(text, add_special_tokens=False)["input_ids"]  # noqa: E731
    opened = ids("Sure:\n```python\ndef f():\n    return 1\n")
    assert not ends(b.tokenizer, jobs[0], "Sure:\n```python\n", opened)  # the opening fence goes on
    assert ends(b.tokenizer, jobs[0], "1\n```", opened + ids("```"))
    plain = Job(ids=[0], budget=1, stops=("\ndef",), seed_key=("T/0", 0))
    assert ends(b.tokenizer, plain, "x\ndef", []) and not ends(b.tokenizer, plain, "```", [])
    # through generate: six tokens cannot repeat the prompt, so the answer's code is the program
    out = b.generate(task, [problem], [req])[0]
    assert 0 < out.n_tokens <= 6 and out.program == chat.extract_code(out.raw)


def test_fim_formats_and_backend_plumbing(demo_model_dir):
    fmt = fim.get_format("starcoder")
    assert fim.render(fmt, "a = ", "\nprint(a)", preprefix="#p\n") == "<fim_prefix>#p\na = <fim_suffix>\nprint(a)<fim_middle>"
    assert fim.get_format(None, "bigcode/santacoder").name == "santacoder"
    assert fim.get_format(None, "x", vocab={"<|fim_prefix|>": 1}).name == "qwen"
    custom = fim.get_format("<A>,<B>,<C>,<END>")
    assert fim.render(custom, "p", "s") == "<A>p<B>s<C>" and custom.end == ("<END>",)
    assert fim.cut_middle(fmt, "x = 1<|endoftext|>junk") == "x = 1"
    with pytest.raises(ValueError):
        fim.get_format(None, "gpt2", vocab={})
    # the demo tokenizer has StarCoder's FIM tokens: the backend builds the FIM prompt
    task = toy_task({"fim_parts": lambda p: (p.record["prefix"], p.record["suffix"])})
    problem = Problem("T/0", 0, "", {"prefix": "def f():\n    return ", "suffix": "\n\nprint(f())\n"})
    b = TransformersBackend(BackendSpec("transformers", demo_model_dir, GenerationArgs(do_sample=False, max_new_tokens=8)))
    req = GenRequest("T/0", 0, "", ())
    rendered, fmt = b.renderer.render(task, problem, req.prompt)
    assert rendered.mode == "fim" and fmt.name == "starcoder"
    assert rendered.text == "<fim_prefix>def f():\n    return <fim_suffix>\n\nprint(f())\n<fim_middle>"
    out = b.generate(task, [problem], [req])[0]
    assert "<|endoftext|>" not in out.raw and out.n_tokens >= 1
