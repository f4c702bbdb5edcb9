"""Instruction tokens, the chat-template path, code-block extraction and FIM prompts."""
from __future__ import annotations

import pytest

from codeeval.benchmarks.spec import Problem, TaskSpec
from codeeval.generation import BackendSpec, GenerationArgs, GenRequest, chat, fim
from codeeval.generation.transformers_backend import TransformersBackend

PROMPT = 'def add(a, b):\n    """Return a + b."""\n'


def toy_task(extra=None):
    return TaskSpec("toy", "toy", lambda o: [], ("\ndef",), lambda p, r, e: p.prompt + r, lambda p, c: c,
                    lambda p: "", extra=extra or {})



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
