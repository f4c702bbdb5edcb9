"""A tiny RoBERTa for the classification tasks' tests and benches, built here in a second.

The reference's architecture (bigcode's scripts fine-tune microsoft/unixcoder-base-nine, a RoBERTa)
at a toy size: a byte-level BPE tokenizer trained on the classification fixtures' own code, with
RoBERTa's special tokens (so pairs read `<s> A </s></s> B </s>`), and a 2-layer encoder with random
weights drawn from a fixed seed. The same files on every machine, no download. A stamp records the
recipe; a folder holding it is reused.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

import pyarrow.parquet as pq

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "classification"
STAMP = "codeeval-tiny-roberta.json"
SPECIALS = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]


@dataclass(frozen=True)
class Recipe:
    vocab_size: int = 600
    hidden_size: int = 32
    layers: int = 2
    heads: int = 2
    intermediate_size: int = 64
    max_positions: int = 1026  # 1024 tokens (the scripts' truncation) + RoBERTa's offset of 2
    seed: int = 0
    dropout: float = 0.1  # RoBERTa's; 0 makes a step's update independent of how its batch is split
    version: int = 1


def fixture_texts() -> list[str]:
    """Every code text of the three fixtures, in file order."""
    texts = []
    for line in (FIXTURES / "codecomplex" / "data.jsonl").read_text(encoding="utf-8").splitlines():
        texts.append(json.loads(line)["src"])
    for split in ("train", "validation", "test"):
        for line in (FIXTURES / "codeclone" / f"{split}.jsonl").read_text(encoding="utf-8").splitlines():
            record = json.loads(line)
            texts += [record["func1"], record["func2"]]
        texts += pq.read_table(FIXTURES / "codedefect" / "data" / f"{split}-00000-of-00001.parquet")["func"].to_pylist()
    return texts


def ensure_tiny_roberta(path: Path, recipe: Recipe = Recipe()) -> Path:
    """The model folder at `path`, built unless it holds this recipe already."""
    path = Path(path)
    stamp = path / STAMP
    if stamp.is_file() and json.loads(stamp.read_text()) == asdict(recipe):
        return path
    import torch
    from tokenizers import ByteLevelBPETokenizer
    from transformers import RobertaConfig, RobertaModel, RobertaTokenizer

    path.mkdir(parents=True, exist_ok=True)
    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(fixture_texts(), vocab_size=recipe.vocab_size, min_frequency=2, special_tokens=SPECIALS,
                            show_progress=False)
    bpe.save_model(str(path))
    tokenizer = RobertaTokenizer(vocab=str(path / "vocab.json"), merges=str(path / "merges.txt"))
    tokenizer.save_pretrained(str(path))
    config = RobertaConfig(vocab_size=len(tokenizer), hidden_size=recipe.hidden_size,
                           num_hidden_layers=recipe.layers, num_attention_heads=recipe.heads,
                           intermediate_size=recipe.intermediate_size, max_position_embeddings=recipe.max_positions,
                           type_vocab_size=1, pad_token_id=tokenizer.pad_token_id, bos_token_id=tokenizer.bos_token_id,
                           eos_token_id=tokenizer.eos_token_id, hidden_dropout_prob=recipe.dropout,
                           attention_probs_dropout_prob=recipe.dropout)
    torch.manual_seed(recipe.seed)
    RobertaModel(config, add_pooling_layer=False).save_pretrained(str(path))
    stamp.write_text(json.dumps(asdict(recipe)))
    return path


if __name__ == "__main__":
    import sys

    print(ensure_tiny_roberta(Path(sys.argv[1]), Recipe(dropout=float(sys.argv[2]) if len(sys.argv) > 2 else 0.1)))
