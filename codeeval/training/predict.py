"""A trained classifier's predictions on test records, batched as bigcode's final `trainer.evaluate`
batches them: consecutive records in batches of the evaluation batch size, padded by the same
collator, the model in eval mode. The predict stage cuts its shards at multiples of that batch size
(codeeval/pipeline/plan.py), so each record meets the same neighbours, and the same padding, as
there. The predicted class is the argmax of the logits (numpy's: the first of equal ones)."""
from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

from codeeval.training.classifier import quiet_loading
from codeeval.training.job import ModelRef


@dataclass(frozen=True)
class Classifier:
    """A trained classifier: its base model, its number of classes and the checkpoint of its weights."""

    model: ModelRef
    num_labels: int
    checkpoint: str
    frozen: bool = True  # the base model was frozen: the checkpoint holds the head only
    device: Optional[str] = None  # None: the first GPU, else the CPU


_lock = threading.Lock()
_loaded: dict[Classifier, tuple] = {}  # the last classifier loaded, per device: a resource, as generation's models


def _open(trained: Classifier) -> tuple:
    import torch

    from codeeval.training.classifier import load_tokenizer, load_trained

    with _lock:
        held = _loaded.get(trained)
        if held is None:
            for other in [t for t in _loaded if t.device == trained.device]:
                del _loaded[other]
            device = trained.device or ("cuda:0" if torch.cuda.is_available() else "cpu")
            with quiet_loading():  # its report lists the head as missing: the checkpoint has it
                model = load_trained(trained.model, trained.num_labels, Path(trained.checkpoint),
                                     trained.frozen).to(device)
            held = _loaded[trained] = (model, load_tokenizer(trained.model), device)
        return held


def predict(trained: Classifier, texts: Sequence[str], pairs: Optional[Sequence[str]], batch_size: int,
            max_length: int, progress=None) -> tuple[list[int], list[list[float]]]:
    """(predicted label ids, class probabilities) of each record, in order."""
    import numpy as np
    import torch
    from transformers import DataCollatorWithPadding

    from codeeval.training.classifier import encode

    model, tokenizer, device = _open(trained)
    encoded = encode(tokenizer, texts, pairs, max_length)
    collate = DataCollatorWithPadding(tokenizer=tokenizer)
    predicted: list[int] = []
    probabilities: list[list[float]] = []
    for start in range(0, len(texts), batch_size):
        features = [{"input_ids": ids, "attention_mask": mask} for ids, mask in
                    zip(encoded["input_ids"][start:start + batch_size],
                        encoded["attention_mask"][start:start + batch_size])]
        batch = {k: v.to(device) for k, v in collate(features).items()}
        with torch.no_grad():
            logits = model(**batch).logits.float()
        predicted += np.argmax(logits.cpu().numpy(), axis=1).tolist()
        probabilities += torch.softmax(logits.double(), dim=-1).cpu().tolist()
        if progress is not None:
            progress(len(features))
    return predicted, probabilities
