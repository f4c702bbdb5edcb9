"""Reading the classification tasks' data: a split from local files in the data set's own record
format, or from the HF hub as bigcode's scripts load it; and CodeComplex's own cut into splits.

Under `--data-dir`, a data set's folder (`<data-dir>/<task>/`, or the HF id's last part) holds each
split as the hub or `datasets` writes it, first found wins: `<split>.jsonl[.gz]`, `<split>.json`
(JSON lines, `Dataset.to_json`), `<split>.parquet` (`Dataset.to_parquet`), `<split>-*.jsonl` /
`<split>-*.parquet` shards, or the hub's `data/<split>-NNNNN-of-NNNNN.parquet`. CodeComplex has
one split on the hub, `train`, in its file `data.jsonl`.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Optional, Sequence

import numpy as np

from codeeval.benchmarks.data import load_hf, read_jsonl
from codeeval.core.errors import UsageError

SPLITS = ("train", "validation", "test")


def folder(data_dir: Path, names: Sequence[str]) -> Path:
    """The data set's folder under `data_dir`: the first of `names` that exists, else `data_dir`."""
    if not data_dir.is_dir():
        raise UsageError(f"data dir not found: {data_dir}")
    return next((data_dir / n for n in names if (data_dir / n).is_dir()), data_dir)


def split_files(base: Path, split: str, single: Sequence[str] = ()) -> list[Path]:
    """The files of `split` under `base` (`single`: file names that hold it whole, tried first)."""
    for name in (*single, f"{split}.jsonl", f"{split}.jsonl.gz", f"{split}.json", f"{split}.parquet"):
        if (base / name).is_file():
            return [base / name]
    for pattern in (f"{split}-*.parquet", f"{split}-*.jsonl", f"data/{split}-*.parquet", f"data/{split}-*.jsonl"):
        if found := sorted(p for p in base.glob(pattern) if p.is_file()):
            return found
    return []


def read_file(path: Path) -> list[dict]:
    """One file's records: Parquet through pyarrow, anything else as JSON lines."""
    if path.suffix != ".parquet":
        return read_jsonl(path)
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        return pq.read_table(path).to_pylist()
    except (OSError, pa.ArrowInvalid) as exc:
        raise UsageError(f"malformed data file {path}: not Parquet ({' '.join(str(exc).split())[:120]})") from None


def local_split(base: Path, task: str, split: str, single: Sequence[str] = ()) -> list[dict]:
    files = split_files(base, split, single)
    if not files:
        expected = " or ".join([*single, f"{split}.jsonl", f"{split}.parquet", f"data/{split}-*.parquet"])
        raise UsageError(f"{task}: no {split} split in {base} (expected {expected})")
    return [record for path in files for record in read_file(path)]


def hub_split(dataset_id: str, split: str, hint: str) -> list[dict]:
    return load_hf(dataset_id, split, local_hint=hint)


def legacy_cut(n: int, test_size: float, state: np.random.RandomState) -> tuple[list[int], list[int]]:
    """`Dataset.train_test_split(test_size)` with no seed, as `datasets` does it after
    `np.random.seed(...)`: a generator seeded from the global state's current key, which then
    steps once; the test part is the permutation's head. (train, test) positions, in that order."""
    _, keys, pos, *_ = state.get_state()
    seed = keys[pos] if pos < 624 else keys[0]
    state.random_sample()
    n_test = math.ceil(test_size * n)
    permutation = np.random.default_rng(seed).permutation(n)
    return permutation[n_test:].tolist(), permutation[:n_test].tolist()


def codecomplex_cut(n: int, seed: int) -> dict[str, list[int]]:
    """bigcode's CodeComplex split of the data set's `n` records after `set_seed(seed)`: 80% train,
    then the rest halved; its `test` is the second cut's train part, its `valid` the second's test."""
    if n < 3:
        raise UsageError(f"codecomplex: {n} records cannot be cut into train, validation and test splits")
    state = np.random.RandomState(seed)
    train, rest = legacy_cut(n, 0.2, state)
    test, validation = legacy_cut(len(rest), 0.5, state)
    return {"train": train, "validation": [rest[i] for i in validation], "test": [rest[i] for i in test]}


def bool_label(value, where: str) -> Optional[str]:
    """A record's boolean label as its class name ("false", "true"): a bool, or 0 / 1."""
    if isinstance(value, bool) or value in (0, 1) and isinstance(value, int):
        return "true" if value else "false"
    raise UsageError(f"{where}: label {value!r} is not one of false, true (0, 1)")
