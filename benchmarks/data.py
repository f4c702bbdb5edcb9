"""Reading benchmark data: local upstream-format files or HF `datasets`."""
from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Iterable, Optional

from codeeval import hub
from codeeval.errors import UsageError


def read_jsonl(path: Path) -> list[dict]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def find_local(data_dir: Path, family: str, names: Iterable[str]) -> Path:
    """`<data_dir>/<family>/<name>` or `<data_dir>/<name>`, first that exists."""
    if not data_dir.is_dir():
        raise UsageError(f"data dir not found: {data_dir}")
    names = list(names)
    for base in (data_dir / family, data_dir):
        for name in names:
            if (base / name).is_file():
                return base / name
    raise UsageError(f"no {family} data in {data_dir}: expected {family}/{names[0]} (upstream format)")


def load_hf(dataset_id: str, split: str, name: Optional[str] = None, local_hint: str = "") -> list[dict]:
    """Load a split from the HF hub (or the local HF cache), as bigcode does. Without the hub
    and without a cached copy this fails at once, naming --data-dir (`local_hint`: the files
    it expects), instead of letting datasets retry for minutes."""
    where = f" (expects {local_hint})" if local_hint else ""
    if not hub.cached_dataset(dataset_id) and not hub.reachable():
        raise UsageError(f"dataset {dataset_id!r} is not in the local HF cache and {hub.unreachable_reason()}: "
                         f"pass --data-dir with a local copy in the upstream format{where}")
    hub.go_offline_if_unreachable()  # a cached copy then loads without retries
    import datasets  # heavy: only when the hub path is taken

    try:
        ds = datasets.load_dataset(dataset_id, name, split=split)
    except (OSError, ValueError) as exc:  # a hub that answers but serves nothing, a config not cached, ...
        cause = (str(exc).strip().splitlines() or [""])[0][:300]
        raise UsageError(f"dataset {dataset_id!r}" + (f" ({name})" if name else "") + f" could not be loaded: "
                         f"{type(exc).__name__}: {cause}; pass --data-dir with a local copy in the upstream "
                         f"format{where}") from None
    return [dict(row) for row in ds]
