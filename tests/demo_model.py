"""A small GPT-style code model trained locally on CPU, for tests and the throughput bench.

The model is an ordinary Hugging Face model directory (GPT-2 architecture, byte-level
BPE tokenizer with an eos token, FIM tokens and a ChatML chat template), trained for a
fixed number of steps on the Python standard library's own source, so every machine
with the same Python and torch builds the same model without any download. The tests
build ``TEST_RECIPE`` (seconds) in pytest's temp dir (tests/conftest.py) so the backends
are tested on a model whose outputs are not noise; ``bench/generation.py`` builds the
full ``Recipe`` (minutes). Its benchmark scores are near zero: `make demo` evaluates a
real pretrained model instead (SmolLM2, scripts/fetch-smollm2.py).

Cache: ``$CODEEVAL_CACHE/demo-model`` (default ``~/.cache/codeeval/demo-model``) unless a
path is given. A stamp file records the recipe; a directory with a matching stamp is
reused at once.
"""
from __future__ import annotations

import contextlib
import fcntl
import json
import math
import os
import shutil
import sys
import sysconfig
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Optional

from codeeval.core.cache import cache_root

RECIPE_VERSION = 1
STAMP = "codeeval-demo.json"
EOS = "<|endoftext|>"
SPECIALS = [EOS, "<fim_prefix>", "<fim_middle>", "<fim_suffix>", "<|im_start|>", "<|im_end|>"]
CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


@dataclass(frozen=True)
class Recipe:
    vocab_size: int = 4096
    n_layer: int = 4
    n_embd: int = 256
    n_head: int = 4
    n_positions: int = 2048
    seq_len: int = 256
    batch_size: int = 8
    steps: int = 320
    lr: float = 2e-3
    corpus_chars: int = 3_000_000
    seed: int = 0


# A reduced budget for tests: the same pipeline in a few seconds (outputs are near-noise).
TEST_RECIPE = Recipe(vocab_size=1024, n_layer=2, n_embd=128, n_head=4, n_positions=1024, seq_len=128,
                     batch_size=8, steps=30, corpus_chars=400_000)


def default_dir() -> Path:
    return cache_root() / "demo-model"


def corpus_files() -> list[Path]:
    """The standard library's top-level modules, in a fixed order."""
    lib = Path(sysconfig.get_paths()["stdlib"])
    return sorted(p for p in lib.glob("*.py") if p.is_file())


def load_corpus(max_chars: int) -> list[str]:
    docs, total = [], 0
    for path in corpus_files():
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        docs.append(text)
        total += len(text)
        if total >= max_chars:
            break
    return docs


def build_tokenizer(docs: list[str], vocab_size: int):
    """A byte-level BPE tokenizer (GPT-2 style) trained on `docs`, as a transformers tokenizer."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIALS, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(docs, trainer=trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=EOS, bos_token=EOS, unk_token=EOS,
                                   pad_token=EOS, additional_special_tokens=SPECIALS[1:],
                                   model_max_length=2048)
    fast.chat_template = CHAT_TEMPLATE
    return fast


def build_model(tokenizer, recipe: Recipe):
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(recipe.seed)
    config = GPT2Config(vocab_size=len(tokenizer), n_positions=recipe.n_positions, n_embd=recipe.n_embd,
                        n_layer=recipe.n_layer, n_head=recipe.n_head, bos_token_id=tokenizer.eos_token_id,
                        eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.eos_token_id,
                        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    return GPT2LMHeadModel(config)


def train(model, tokenizer, docs: list[str], recipe: Recipe, log=print) -> float:
    """Plain next-token training on packed sequences; returns the final loss."""
    import torch

    ids: list[int] = []
    for enc in tokenizer.backend_tokenizer.encode_batch(docs, add_special_tokens=False):
        ids.extend(enc.ids)
        ids.append(tokenizer.eos_token_id)
    data = torch.tensor(ids, dtype=torch.long)
    n_seq = (len(data) - 1) // recipe.seq_len
    g = torch.Generator().manual_seed(recipe.seed)
    opt = torch.optim.AdamW(model.parameters(), lr=recipe.lr, betas=(0.9, 0.95), weight_decay=0.1)
    warmup = max(1, recipe.steps // 20)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / warmup) * 0.5 * (1 + math.cos(math.pi * min(s, recipe.steps) / recipe.steps)))
    model.train()
    t0, loss_val = time.time(), float("nan")
    for step in range(recipe.steps):
        starts = torch.randint(0, n_seq, (recipe.batch_size,), generator=g) * recipe.seq_len
        batch = torch.stack([data[s:s + recipe.seq_len + 1] for s in starts.tolist()])
        out = model(input_ids=batch[:, :-1], labels=batch[:, :-1])
        # labels are shifted inside the model; feeding [:-1] keeps the shapes equal
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
        loss_val = out.loss.item()
        if log and (step % 50 == 0 or step == recipe.steps - 1):
            log(f"demo-model: step {step + 1}/{recipe.steps} loss {loss_val:.3f} ({time.time() - t0:.0f}s)")
    model.eval()
    return loss_val


def _stamp(recipe: Recipe) -> dict:
    import torch

    return {"recipe_version": RECIPE_VERSION, "recipe": asdict(recipe),
            "python": sys.version.split()[0], "torch": torch.__version__.split("+")[0]}


def is_built(path: Path, recipe: Recipe) -> bool:
    stamp = path / STAMP
    if not stamp.is_file() or not (path / "config.json").is_file():
        return False
    try:
        got = json.loads(stamp.read_text())
    except ValueError:
        return False
    return got.get("recipe_version") == RECIPE_VERSION and got.get("recipe") == asdict(recipe)


@contextlib.contextmanager
def _locked(path: Path):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.parent / f".{path.name}.lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def ensure_demo_model(path: Optional[os.PathLike] = None, recipe: Recipe = Recipe(), force: bool = False,
                      log=print) -> Path:
    """The demo model's directory, building and caching it on first use (``log=None``: silent)."""
    import torch

    log = log or (lambda *_: None)
    path = Path(path).expanduser() if path else default_dir()
    if not force and is_built(path, recipe):
        return path
    with _locked(path):
        if not force and is_built(path, recipe):  # another process built it meanwhile
            return path
        t0 = time.time()
        torch_threads = torch.get_num_threads()
        docs = load_corpus(recipe.corpus_chars)
        log(f"demo-model: training a tokenizer on {sum(map(len, docs)):,} chars of the standard library")
        tokenizer = build_tokenizer(docs, recipe.vocab_size)
        model = build_model(tokenizer, recipe)
        n_params = sum(p.numel() for p in model.parameters())
        log(f"demo-model: training {n_params / 1e6:.1f}M parameters for {recipe.steps} steps "
            f"on {torch_threads} CPU threads")
        loss = train(model, tokenizer, docs, recipe, log)
        tmp = Path(tempfile.mkdtemp(prefix=".demo-model-", dir=path.parent))
        try:
            model.save_pretrained(tmp)
            tokenizer.save_pretrained(tmp)
            stamp = _stamp(recipe) | {"final_loss": round(loss, 4), "train_seconds": round(time.time() - t0, 1),
                                      "parameters": n_params}
            (tmp / STAMP).write_text(json.dumps(stamp, indent=2) + "\n")
            if path.exists():
                shutil.rmtree(path)
            os.replace(tmp, path)
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
        log(f"demo-model: saved to {path} in {time.time() - t0:.0f}s (final loss {loss:.3f})")
    return path
