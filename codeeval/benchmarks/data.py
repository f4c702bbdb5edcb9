"""Reading benchmark data: local upstream-format files or HF `datasets`."""
from __future__ import annotations

import gzip
import json
import re
import zlib
from pathlib import Path
from typing import Iterable, Optional

from codeeval.core import hub
from codeeval.core.errors import UsageError


def _text(path: Path) -> str:
    """The file's text; UsageError for one that is unreadable, not gzip or not UTF-8."""
    try:
        if path.suffix == ".gz":
            with gzip.open(path, "rt", encoding="utf-8") as fh:
                return fh.read()
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(f"malformed data file {path}: not UTF-8 (byte {exc.start})") from None
    except (OSError, EOFError, zlib.error) as exc:
        raise UsageError(f"cannot read data file {path}: {getattr(exc, 'strerror', None) or exc}") from None


SURROGATE = re.compile(r"\\u[dD][89a-fA-F]")  # a JSON escape of half a UTF-16 pair


def parse_json(text: str, path: Path, where: str = "", what: str = "data file", surrogates: bool = True):
    """json.loads, or one UsageError line naming the file (and `where` in it) and why; with
    `surrogates`, a lone UTF-16 half in a string is refused too (the caller may name it better)."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"malformed {what} {path}{where}: not JSON ({exc.msg} at line {exc.lineno})") from None
    except (ValueError, RecursionError) as exc:  # a 5,000-digit number, nesting deeper than Python's stack
        raise UsageError(f"malformed {what} {path}{where}: not JSON Python reads ({type(exc).__name__})") from None
    if surrogates and SURROGATE.search(text) and not encodable(json.dumps(value, ensure_ascii=False)):
        raise UsageError(f"malformed {what} {path}{where}: a lone surrogate (\\ud800-\\udfff) is no text "
                         "(no program could hold it)")
    return value


def read_jsonl(path: Path) -> list[dict]:
    """One JSON object a line; any other line is a UsageError naming it."""
    rows = []
    for number, line in enumerate(_text(path).splitlines(), 1):
        if line.strip():
            row = parse_json(line, path, f", line {number}")
            if not isinstance(row, dict):
                raise UsageError(f"malformed data file {path}, line {number}: not a JSON object")
            rows.append(row)
    return rows


def read_json(path: Path):
    """A whole-file JSON document (few-shot prompts, CoNaLa's and Spider's arrays)."""
    return parse_json(_text(path), path)


def check_fields(records: list, fields: dict, where: str) -> list[dict]:
    """`records` unchanged when each is a JSON object whose `fields` (name -> type or tuple of
    types) the task reads, with those types; else a UsageError naming the first bad record.
    A data file that cannot be right for a task is refused at load, never half scored."""
    if not isinstance(records, list):
        raise UsageError(f"malformed {where}: expected a list of records")
    for n, record in enumerate(records):
        check_record(record, fields, f"{where}: record {n}")
    return records


def check_record(record, fields: dict, where: str) -> dict:
    """One record as check_fields checks each; `where` names it ("DS-1000 record 3")."""
    if not isinstance(record, dict):
        raise UsageError(f"{where} is malformed: not a JSON object")
    for name, kind in fields.items():
        value = record.get(name)
        kinds = kind if isinstance(kind, tuple) else (kind,)
        if name not in record or not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
            what = "missing" if name not in record else f"a {type(value).__name__}"
            raise UsageError(f"{where} is malformed: its {name!r} is {what}, expected {_names(kind)}")
        if isinstance(value, str) and not encodable(value):
            raise UsageError(f"{where} is malformed: its {name!r} is not valid Unicode (a lone surrogate)")
    return record


def _names(kind) -> str:
    return " or ".join(k.__name__ for k in kind) if isinstance(kind, tuple) else kind.__name__


def encodable(text: str) -> bool:
    """Whether `text` can be written as UTF-8 (a JSON file can hold a lone surrogate; no file, program or
    Parquet column can)."""
    try:
        text.encode("utf-8")
        return True
    except UnicodeEncodeError:
        return False


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
