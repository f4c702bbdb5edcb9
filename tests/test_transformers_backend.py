"""The transformers backend on the small locally trained test model (conftest.demo_model_dir)."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from codeeval.benchmarks.spec import Problem, TaskSpec
from codeeval.core.fingerprint import model_fingerprint
from codeeval.generation import BackendSpec, GenerationArgs, GenRequest, backend_class
from codeeval.generation.hf.transformers_backend import TransformersBackend

STOPS = ("\ndef", "\nclass", "\nif", "\nprint", "\n#")
PROMPTS = [
    'def add(a, b):\n    """Return the sum of a and b."""\n',
    "import os\n\n\ndef list_files(path):\n    for name in os.listdir(path):\n",
    "class Stack:\n    def __init__(self):\n        self.items = []\n\n    def push(self, item):\n",
    "x = [",
    "def f(n):\n    # a prompt that itself holds stop words\n    if n:\n        print(n)\n\ndef g():\n",
    'def is_prime(n: int) -> bool:\n    """Check whether n is prime.\n    >>> is_prime(7)\n    True\n    """\n',
]



@pytest.fixture(scope="module")
def problems():
    return [Problem(f"T/{i}", i, p, {}) for i, p in enumerate(PROMPTS)]


def make_task(problems, stops=STOPS):
    def postprocess(problem, raw, extra):
        cut = len(raw)
        for s in stops + tuple(extra):
            i = raw.find(s)
            if i != -1:
                cut = min(cut, i)
        return problem.prompt + raw[:cut]

    return TaskSpec("toy", "toy", lambda o: problems, stops, postprocess, lambda p: "", ())


def backend(demo_model_dir, **kw):
    return TransformersBackend(BackendSpec("transformers", demo_model_dir, GenerationArgs(**kw)))


def requests_for(problems, n, stops):
    return [GenRequest(p.task_id, s, p.prompt, stops) for p in problems for s in range(n)]


def as_tuples(outs):
    return [(o.raw, o.n_tokens, o.finish_reason) for o in outs]


def test_batched_greedy_equals_one_at_a_time(demo_model_dir, problems):
    task = make_task(problems)
    one = backend(demo_model_dir, do_sample=False, max_new_tokens=48, max_batch_rows=1)
    many = backend(demo_model_dir, do_sample=False, max_new_tokens=48, max_batch_rows=16)
    stops = STOPS + (one.eos_text(),)
    reqs = requests_for(problems, 2, stops)
    got_one = as_tuples(one.generate(task, problems, reqs))
    got_many = as_tuples(many.generate(task, problems, reqs))
    assert got_one == got_many
    # n copies of a greedy request are identical, and each is a real continuation
    assert got_many[0::2] == got_many[1::2]
    assert all(n > 0 for _, n, _ in got_many)
    # also against transformers' own generate, one prompt at a time, no stop words
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(demo_model_dir)
    model = AutoModelForCausalLM.from_pretrained(demo_model_dir)
    plain = as_tuples(many.generate(task, problems, requests_for(problems, 1, ())))
    for p, (raw, n, reason) in zip(problems, plain):
        ids = tok(p.prompt, return_tensors="pt").input_ids
        gen = model.generate(ids, max_new_tokens=48, do_sample=False, pad_token_id=tok.eos_token_id)
        assert raw == tok.decode(gen[0, ids.shape[1]:], skip_special_tokens=False)
        assert reason in ("length", "eos")


def test_stop_words_are_per_row_and_never_cut_the_prompt(demo_model_dir, problems):
    task = make_task(problems, stops=("\n",))
    b = backend(demo_model_dir, do_sample=False, max_new_tokens=40, max_batch_rows=8)
    outs = b.generate(task, problems, requests_for(problems, 1, ("\n",)))
    assert any(o.finish_reason == "stop" for o in outs)
    for p, o in zip(problems, outs):
        assert not o.raw.startswith(p.prompt)  # continuation only
        if o.finish_reason == "stop":
            # the row stopped at the token completing the stop: nothing decoded after it
            assert "\n" in o.raw and o.n_tokens < 40
        program = task.postprocess(p, o.raw, ())
        assert program.startswith(p.prompt)  # stop words inside the prompt are never cut
    # a row that stops leaves the batch; the others still run to their own end
    lengths = {o.n_tokens for o in outs}
    assert len(lengths) > 1


def test_budget_follows_max_length_generation(demo_model_dir, problems):
    task = make_task(problems)
    b = backend(demo_model_dir, do_sample=False, max_length_generation=60, max_batch_rows=8)
    outs = b.generate(task, problems, requests_for(problems, 1, ()))
    for p, o in zip(problems, outs):
        n_prompt = len(b.tokenizer(p.prompt)["input_ids"])
        if o.finish_reason == "length":
            assert o.n_tokens == 60 - n_prompt  # prompt + completion = max_length_generation
    short = backend(demo_model_dir, do_sample=False, max_length_generation=10)
    outs = short.generate(task, problems, requests_for(problems, 1, ()))
    assert outs[0].finish_reason == "prompt_too_long" and outs[0].raw == "" and outs[0].n_tokens == 0
    assert outs[3].finish_reason != "prompt_too_long"  # "x = [" fits


def test_eos_finishes_a_row(demo_model_dir, problems):
    task = make_task(problems)
    b = backend(demo_model_dir, do_sample=False, max_new_tokens=5)
    b.eos_ids = list(range(len(b.tokenizer)))  # pretend every token ends the text
    out = b.generate(task, problems[:1], requests_for(problems[:1], 1, ()))[0]
    assert out.finish_reason == "eos" and out.n_tokens == 1


def test_sampling_seeds_do_not_depend_on_batch_or_shard(demo_model_dir, problems):
    task = make_task(problems)
    kw = dict(do_sample=True, temperature=0.8, top_p=0.95, max_new_tokens=24, seed=3)
    reqs = requests_for(problems, 3, ())
    a = as_tuples(backend(demo_model_dir, max_batch_rows=1, **kw).generate(task, problems, reqs))
    b = backend(demo_model_dir, max_batch_rows=7, **kw)
    together = as_tuples(b.generate(task, problems, reqs))
    assert a == together
    # two "device shards" each holding half of the requests, in another order
    half = len(reqs) // 2
    split = as_tuples(b.generate(task, problems, reqs[half:])) + as_tuples(b.generate(task, problems, reqs[:half]))
    assert split[len(reqs) - half:] + split[:len(reqs) - half] == together
    # samples of one prompt differ from each other; another seed changes them
    assert len({together[0], together[1], together[2]}) > 1
    other = as_tuples(backend(demo_model_dir, max_batch_rows=7, **dict(kw, seed=4)).generate(task, problems, reqs))
    assert other != together


def test_top_k_and_low_temperature_behave(demo_model_dir, problems):
    task = make_task(problems)
    greedy = as_tuples(backend(demo_model_dir, do_sample=False, max_new_tokens=16).generate(
        task, problems, requests_for(problems, 1, ())))
    top1 = as_tuples(backend(demo_model_dir, do_sample=True, top_k=1, top_p=1.0, temperature=1.0,
                             max_new_tokens=16).generate(task, problems, requests_for(problems, 1, ())))
    assert top1 == greedy


def test_fingerprint_tracks_weights(tmp_path, demo_model_dir):
    import shutil

    copy = tmp_path / "m"
    shutil.copytree(demo_model_dir, copy)
    before = model_fingerprint(str(copy))
    assert before == model_fingerprint(str(copy))
    weights = next(p for p in copy.iterdir() if p.suffix == ".safetensors")
    weights.write_bytes(weights.read_bytes() + b"")
    os.utime(weights, ns=(1, 1))
    assert model_fingerprint(str(copy)) != before
    assert model_fingerprint("bigcode/starcoder", "v1") == "hub:bigcode/starcoder@v1"


def test_default_install_works_without_vllm():
    code = (
        "import sys\n"
        "import codeeval.generation as g\n"
        "from codeeval.generation.hf import transformers_backend\n"
        "from codeeval.generation.api import openai_backend\n"
        "from codeeval.generation.prompts import chat, fim\n"
        "assert 'vllm' not in sys.modules\n"
        "try:\n"
        "    import vllm  # noqa\n"
        "    have = True\n"
        "except ImportError:\n"
        "    have = False\n"
        "if not have:\n"
        "    try:\n"
        "        g.open_backend(g.BackendSpec('vllm', 'x'))\n"
        "    except ImportError as e:\n"
        "        assert \"codeeval[vllm]\" in str(e), e\n"
        "    else:\n"
        "        raise SystemExit('expected ImportError')\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
    assert backend_class("transformers") is TransformersBackend


def test_vllm_backend_against_a_stub_engine(monkeypatch, demo_model_dir, problems):
    """vllm is not installed here: a stub module checks how requests map onto vLLM's API."""
    import types

    from transformers import AutoTokenizer

    calls = {}

    class SamplingParams:
        def __init__(self, **kw):
            self.kw = kw

    class LLM:
        def __init__(self, **kw):
            calls["init"] = kw
            calls["engines"] = calls.get("engines", 0) + 1
            self.tok = AutoTokenizer.from_pretrained(demo_model_dir)

        def get_tokenizer(self):
            return self.tok

        def generate(self, prompts, params, use_tqdm=False):
            calls["generate"] = (prompts, params)
            out = types.SimpleNamespace(text="    return 1\ndef", token_ids=[1, 2, 3], finish_reason="stop",
                                        stop_reason="\ndef")
            return [types.SimpleNamespace(outputs=[out]) for _ in prompts]

    monkeypatch.setitem(sys.modules, "vllm", types.SimpleNamespace(LLM=LLM, SamplingParams=SamplingParams))
    from codeeval.generation.vllm_backend import VLLMBackend

    args = GenerationArgs(do_sample=False, max_length_generation=40, precision="bf16")
    b = VLLMBackend(BackendSpec("vllm", demo_model_dir, args, options=(("enforce_eager", "on"),
                                                                        ("tensor_parallel_size", "2"))))
    assert calls["init"]["dtype"] == "bfloat16" and calls["init"]["tensor_parallel_size"] == 2
    # parsed by codeeval/generation/options.py; an option not given is left to vLLM's own default
    assert calls["init"]["enforce_eager"] is True and calls["init"]["gpu_memory_utilization"] == 0.9
    assert "swap_space" not in calls["init"] and "max_model_len" not in calls["init"]
    with pytest.raises(ValueError, match="backend option swap_space must be a number >= 0, not '-1'"):
        VLLMBackend(BackendSpec("vllm", demo_model_dir, args, options=(("swap_space", "-1"),)))
    assert calls["engines"] == 1  # refused before an engine starts
    task = make_task(problems)
    reqs = requests_for(problems, 2, STOPS)
    outs = b.generate(task, problems, reqs)
    prompts, params = calls["generate"]
    lengths = [len(b.tokenizer(p)["input_ids"]) for p in PROMPTS]
    fits = [n < 40 for n in lengths]
    assert 0 < sum(fits) < len(PROMPTS)
    assert len(prompts) == sum(fits)  # greedy copies sent once; too-long prompts not at all
    first = params[0].kw
    assert first["max_tokens"] == 40 - lengths[fits.index(True)] and first["temperature"] == 0.0
    assert first["stop"] == list(STOPS) and first["include_stop_str_in_output"]
    for i, ok in enumerate(fits):
        out = outs[2 * i]
        if ok:
            assert out.raw == "    return 1\ndef" and out.finish_reason == "stop" and out.n_tokens == 3
        else:
            assert out.finish_reason == "prompt_too_long" and out.raw == ""
    # stop strings are de-duplicated (the caller's eos may repeat a task stop word)
    dup = b.generate(task, problems[3:4], [GenRequest("T/3", 0, PROMPTS[3], STOPS + ("\ndef",))])
    assert calls["generate"][1][0].kw["stop"] == list(STOPS) and dup[0].finish_reason == "stop"

    # several GPUs: one engine (tensor_parallel_size), never one spec per device, since the
    # flow's device shards are threads of one process and vLLM picks its GPUs per process
    from codeeval.generation.hf import devices

    gpus = ["cuda:0", "cuda:1", "cuda:2"]
    for opts in ((), (("tensor_parallel_size", "2"),)):
        vspec = BackendSpec("vllm", demo_model_dir, args, options=opts)
        assert devices.plan(vspec, devices=gpus) == [vspec]
    tspec = BackendSpec("transformers", demo_model_dir, args)
    assert [s.device for s in devices.plan(tspec, devices=gpus)] == gpus
    # close() drops the engine (open_backend closes a replaced backend)
    import weakref

    engine = weakref.ref(b.llm)
    b.close()
    assert b.llm is None and engine() is None
    b.close()  # twice is fine


def test_options_are_read_through_the_declaration_before_the_model_loads(demo_model_dir):
    """codeeval/generation/options.py: a name the backend does not take or a bad value is refused
    before any load (the model path does not exist), and the defaults are the machine's."""
    missing = "/nonexistent/model-dir"
    with pytest.raises(ValueError, match=r"^compile_mod is not an option of the transformers backend$"):
        TransformersBackend(BackendSpec("transformers", missing, options=(("compile_mod", "default"),)))
    with pytest.raises(ValueError, match=r"^backend option check_every must be an integer >= 1, not 'x'$"):
        TransformersBackend(BackendSpec("transformers", missing, options=(("check_every", "x"),)))
    b = backend(demo_model_dir, do_sample=False)  # on a CPU
    assert (b.decoder, b.options["compile_mode"], b.options["check_every"], b.options["step_tokens"]) == (
        "dynamic", "default", 4, 48)
    assert b.draft_tokens == 10 and b.context == b.model.config.max_position_embeddings
    b = TransformersBackend(BackendSpec("transformers", demo_model_dir, GenerationArgs(do_sample=False),
                                        options=(("batch_rows", 3), ("max_context", "64"), ("prompt_lookup", "0"))))
    assert b._rows_per_batch(10) == 3 and b.context == 64 and b.options["prompt_lookup"] == 0


def test_the_defaults_a_machine_decides_are_what_the_options_table_says():
    """options.resolve decides every default the transformers backend leaves to the machine as its
    words in docs/generation.md's table say, on a CPU, a GPU in bf16 and a GPU in fp32; a given value
    wins; the static decoder's settings are those decisions (StaticSettings.resolve)."""
    from codeeval.generation import options
    from codeeval.generation.hf.static.settings import StaticSettings

    decided = ("decoder", "compile", "fuse_products", "thin_products", "live_attention", "live_query_block",
               "prefill_tokens", "prompt_lookup")

    def decide(machine, **given):
        values = options.resolve("transformers", options.parse("transformers", given), machine)
        return tuple(values[name] for name in decided)

    assert decide(options.Machine("cpu")) == ("dynamic", False, False, 0, 0, 128, 1024, 10)
    assert decide(options.Machine("cuda", half=True)) == ("static", True, True, 1, 1, 16, 4096, 0)
    assert decide(options.Machine("cuda")) == ("static", True, False, 0, 0, 16, 4096, 0)
    assert decide(options.Machine("cuda", half=True), compile="no", prefill_tokens="64", prompt_lookup="3",
                  live_query_block="64") == ("static", False, True, 1, 1, 64, 64, 3)
    words = {o.name: o.shown_default() for o in options.OPTIONS["transformers"]}
    assert [words[name] for name in decided] == [
        "static on a GPU, dynamic on a CPU", "yes on a GPU, no on a CPU", "yes in bf16 and fp16, no in fp32",
        "1 in bf16 and fp16, 0 in fp32", "1 in bf16 and fp16 on a GPU, else 0", "16 on a GPU, else 128",
        "4096 on a GPU, 1024 on a CPU",
        "10 on a CPU, 0 on a GPU"]
    settings = StaticSettings.resolve(options.parse("transformers", {"live_attention": "3"}),
                                      options.Machine("cuda", half=True))
    assert (settings.compile, settings.graph, settings.check_every, settings.prefill_tokens, settings.compile_mode,
            settings.fuse, settings.thin_rows, settings.live_from, settings.store) == (
        True, True, 4, 4096, "default", True, 1, 3, True)


def test_batch_size_counts_the_largest_budget_of_the_batch(demo_model_dir):
    """Under --max_length_generation shorter prompts get larger budgets: the KV cache is
    sized for the longest prompt plus the largest budget among the batch's rows."""
    from codeeval.generation.prompts.requests import Job

    b = backend(demo_model_dir, do_sample=False, max_length_generation=400)
    seen = []

    def rows_per_batch(max_len):
        seen.append(max_len)
        return max(1, 4000 // max_len)

    b._rows_per_batch = rows_per_batch
    rows = [Job(ids=[0] * 300, budget=100, stops=(), seed_key=("a", 0))] + \
        [Job(ids=[0] * 10, budget=390, stops=(), seed_key=("b", i)) for i in range(20)]
    size = b._batch_size(rows, 0)
    assert seen[0] == 400  # the first row alone would allow 10 rows ...
    assert size == 4000 // (300 + 390) and seen[-1] == 300 + 390  # ... its batch needs 690 a row
