"""The classifier as bigcode's scripts build it, for training and prediction alike.

`AutoModelForSequenceClassification` over the base model with `num_labels` classes, the tokenizer's
eos as its pad token and the config's eos id as its pad id, the base model frozen (the head trains).
The scripts freeze `model.roberta`, which only a RoBERTa has; this freezes `model.base_model`, the same
module there and the backbone of any architecture (docs/deviations.md).

Prediction rebuilds the model the same way and loads the trained weights into it, rather than
`from_pretrained` on the checkpoint: the checkpoint's config says pad = eos, and RoBERTa numbers its
positions from the pad id it was built with, so a model built from that config would compute other
logits than the one that was trained (and that bigcode evaluates in memory).
"""
from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Iterator, Optional, Sequence

import pyarrow.parquet as pq

from codeeval.training.job import ModelRef

TOKENIZE_BATCH = 1000  # records per tokenizer call (datasets.map's default batch, as the scripts tokenize)


@contextlib.contextmanager
def quiet_loading() -> Iterator[None]:
    """transformers' warnings and progress bars off while a model loads (its load report, its bar of
    weights), back as they were after."""
    from transformers.utils import logging as hf_logging

    level, bars = hf_logging.get_verbosity(), hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        hf_logging.set_verbosity(level)
        if bars:
            hf_logging.enable_progress_bar()


# a local model's vocabulary is one of these (transformers 5 builds a tokenizer of special tokens alone
# where a folder has none: a classifier would then train on nothing but those)
VOCABULARIES = ("tokenizer.json", "tokenizer.model", "vocab.json", "vocab.txt", "spiece.model",
                "sentencepiece.bpe.model")


def unsupported(model: ModelRef) -> Optional[str]:
    """Why transformers cannot build a sequence classifier on `model`, in one phrase (read from its
    config and its file names alone, before any training); None when it can."""
    from transformers import AutoConfig
    from transformers.models.auto.modeling_auto import MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES

    with quiet_loading():
        try:
            config = AutoConfig.from_pretrained(model.name_or_path, **model.load_kwargs())
        except (OSError, ValueError, KeyError, TypeError) as exc:
            return f"its config cannot be read ({(str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]})"
    if config.model_type not in MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES:
        return f"transformers has no sequence-classification model for its type {config.model_type!r}"
    folder = Path(model.name_or_path)
    if folder.is_dir() and not model.gguf_file and not any((folder / name).is_file() for name in VOCABULARIES):
        return f"its folder has no tokenizer ({', '.join(VOCABULARIES[:3])}, ...)"
    return None


def load_tokenizer(model: ModelRef):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model.name_or_path, **model.load_kwargs())
    if len(tokenizer) <= len(tokenizer.all_special_tokens):
        raise ValueError(f"the tokenizer of {model.name_or_path} has no vocabulary beside its special tokens")
    if tokenizer.eos_token is None:
        raise ValueError(f"the tokenizer of {model.name_or_path} has no eos token, which the classifier pads with")
    tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def load_model(model: ModelRef, num_labels: int, freeze: bool):
    """The classifier with a freshly initialised head (torch's RNG: seed before calling), in float32 (the
    scripts train in the dtype transformers 4 loaded by default). A GGUF file's weights are dequantized:
    the Trainer refuses a model that still carries a quantizer, and nothing of it is quantized then."""
    import torch
    from transformers import AutoModelForSequenceClassification, GgufConfig

    kwargs = model.load_kwargs()
    if model.gguf_file:
        kwargs["quantization_config"] = GgufConfig(gguf_file=model.gguf_file, dequantize=True)
    classifier = AutoModelForSequenceClassification.from_pretrained(model.name_or_path, num_labels=num_labels,
                                                                    dtype=torch.float32, **kwargs)
    if getattr(classifier, "hf_quantizer", None) is not None:
        classifier.hf_quantizer.remove_quantization_config(classifier)
    eos = classifier.config.eos_token_id
    classifier.config.pad_token_id = eos[0] if isinstance(eos, (list, tuple)) else eos
    if freeze:
        base = classifier.base_model
        if base is classifier:
            raise ValueError(f"{type(classifier).__name__} has no base model apart from its head: freeze=false")
        for parameter in base.parameters():
            parameter.requires_grad = False
    if not any(p.requires_grad for p in classifier.parameters()):
        raise ValueError(f"{type(classifier).__name__}: freezing its base model left nothing to train")
    return classifier


def load_trained(model: ModelRef, num_labels: int, checkpoint: Path, frozen: bool):
    """The classifier as training left it: built as for training, the checkpoint's weights loaded in
    (`frozen`: the checkpoint holds only what trained; the base model's weights are the ones loaded)."""
    from safetensors.torch import load_file

    classifier = load_model(model, num_labels, freeze=False)
    prefix = classifier.base_model_prefix
    base = {f"{prefix}.{name}" for name in classifier.base_model.state_dict()} if frozen else set()
    index = checkpoint / "model.safetensors.index.json"
    if index.is_file():
        import json

        shards = sorted(set(json.loads(index.read_text(encoding="utf-8"))["weight_map"].values()))
        state = {k: v for shard in shards for k, v in load_file(str(checkpoint / shard)).items()}
    else:
        state = load_file(str(checkpoint / "model.safetensors"))
    result = classifier.load_state_dict(state, strict=False)
    tied = set(getattr(classifier, "all_tied_weights_keys", None) or {})
    missing = [k for k in result.missing_keys if k not in tied and k not in base]
    if result.unexpected_keys or missing:
        raise ValueError(f"checkpoint {checkpoint} does not fit {type(classifier).__name__}: "
                         f"missing {missing[:3]}, unexpected {result.unexpected_keys[:3]}")
    return classifier.eval()


def read_split(path: Path) -> dict[str, list]:
    """A split file of the load stage: id, text, text_pair (None for one text), label."""
    return pq.read_table(path).to_pydict()


def encode(tokenizer, texts: Sequence[str], pairs: Optional[Sequence[Optional[str]]], max_length: int) -> dict:
    """input_ids and attention_mask, as the scripts' `tokenizer(text[, text_pair], truncation=True,
    max_length=...)` gives them, a batch of TOKENIZE_BATCH records per call."""
    out: dict[str, list] = {"input_ids": [], "attention_mask": []}
    has_pairs = pairs is not None and any(p is not None for p in pairs)
    for start in range(0, len(texts), TOKENIZE_BATCH):
        stop = start + TOKENIZE_BATCH
        args = (list(texts[start:stop]), list(pairs[start:stop])) if has_pairs else (list(texts[start:stop]),)
        encoded = tokenizer(*args, truncation=True, max_length=max_length)
        out["input_ids"] += encoded["input_ids"]
        out["attention_mask"] += encoded["attention_mask"]
    return out
