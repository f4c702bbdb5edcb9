"""Reading the APPS test split without the hub: the upstream layouts, filtered to one level.

`--data-dir` may hold (under `apps/` or at its top), first found wins:
* `test.jsonl`: the file of the HF dataset repo codeparrot/apps (one record per line, `id`
  or `problem_id`), which its loading script reads;
* a `datasets` save_to_disk copy: a DatasetDict (`dataset_dict.json` with a `test` split) or a
  Dataset directory `test/` (`state.json`);
* hendrycks/apps's extracted tarball: `test/<NNNN>/` folders with question.txt,
  solutions.json, input_output.json, metadata.json (difficulty, url) and starter_code.py.
Without `--data-dir`, `codeparrot/apps` with the level as its config, as bigcode loads it.
Records keep the HF row's fields; their order is the file's (problem ids ascending upstream),
which apps_metric relies on.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Iterable, Optional

from codeeval.benchmarks.data import check_record, load_hf, read_jsonl
from codeeval.benchmarks.spec import LoadOptions
from codeeval.core.errors import UsageError

LEVELS = ("introductory", "interview", "competition")
FIELDS = ("problem_id", "question", "solutions", "input_output", "difficulty", "url", "starter_code")
TYPES = {"problem_id": (int, str), "question": str, "solutions": str, "input_output": str, "difficulty": str,
         "starter_code": (str, type(None))}  # what the tasks read of them (codeeval/benchmarks/data.py check_fields)


def _folder_record(folder: Path) -> dict:
    def text(name: str, default: Optional[str] = None) -> str:
        path = folder / name
        if not path.is_file():
            if default is None:
                raise UsageError(f"APPS problem folder {folder} has no {name}")
            return default
        return path.read_text(encoding="utf-8")

    metadata = json.loads(text("metadata.json", "{}"))
    return {"problem_id": int(folder.name), "question": text("question.txt"),
            "solutions": text("solutions.json", ""), "input_output": text("input_output.json", ""),
            "difficulty": metadata.get("difficulty", ""), "url": metadata.get("url", ""),
            "starter_code": text("starter_code.py", "")}


def _local(data_dir: Path) -> list[dict]:
    if not data_dir.is_dir():
        raise UsageError(f"data dir not found: {data_dir}")
    for base in (data_dir / "apps", data_dir):
        if (base / "test.jsonl").is_file():
            return read_jsonl(base / "test.jsonl")
        if (base / "dataset_dict.json").is_file() or (base / "test" / "state.json").is_file():
            import datasets

            saved = datasets.load_from_disk(str(base if (base / "dataset_dict.json").is_file() else base / "test"))
            return [dict(row) for row in (saved["test"] if isinstance(saved, datasets.DatasetDict) else saved)]
        folders = sorted((p for p in (base / "test").glob("[0-9]*") if p.is_dir()), key=lambda p: int(p.name)) \
            if (base / "test").is_dir() else []
        if folders:
            return [_folder_record(f) for f in folders]
    raise UsageError(f"no APPS data in {data_dir}: expected apps/test.jsonl (codeparrot/apps), a datasets "
                     f"save_to_disk copy, or hendrycks/apps's test/<NNNN>/ folders")


_WARNED: set = set()
MALFORMED = "codeeval_malformed_input_output"  # set on a record whose input_output has no inputs/outputs lists


def normalized(rows: Iterable[dict], strict: bool = True) -> list[dict]:
    """HF rows with `problem_id` (the repo's jsonl calls it `id`); a clear error for a record
    missing a field. An input_output that is not a JSON object with inputs and outputs lists is
    an error with `strict`, else the record is marked MALFORMED: apps_metric scores it -2."""
    records = []
    for n, row in enumerate(rows):
        row = dict(row)
        if "problem_id" not in row and "id" in row:
            row["problem_id"] = row.pop("id")
        missing = [f for f in FIELDS if f not in row]
        if missing:
            raise UsageError(f"APPS record {n} is malformed: no {', '.join(missing)}")
        check_record(row, TYPES, f"APPS record {n}")
        try:
            io = json.loads(row["input_output"])
            if not isinstance(io.get("inputs"), list) or not isinstance(io.get("outputs"), list):
                raise ValueError
        except (ValueError, TypeError, AttributeError):
            if strict:
                raise UsageError(f"APPS problem {row['problem_id']}: input_output is not a JSON object with "
                                 f"inputs and outputs lists") from None
            row[MALFORMED] = True
        records.append(row)
    return records


def load_records(options: LoadOptions, level: str) -> list[dict]:
    if options.data_dir is not None:
        rows = [r for r in normalized(_local(options.data_dir), options.strict_data) if r["difficulty"] == level]
        if not rows:
            raise UsageError(f"no {level} problems in the APPS data under {options.data_dir}")
    else:
        rows = normalized(load_hf("codeparrot/apps", "test", name=level,
                                  local_hint="apps/test.jsonl, a save_to_disk copy or hendrycks's test/ folders"),
                          options.strict_data)
    bad = [str(r["problem_id"]) for r in rows if r.get(MALFORMED)]
    if bad and (level, tuple(bad)) not in _WARNED:  # once per process: the run loads a task twice
        _WARNED.add((level, tuple(bad)))
        print(f"codeeval: warning: APPS {level}: {len(bad)} problem(s) with an empty or malformed input_output "
              f"scored as a compile error (-2), as apps_metric does: {', '.join(bad[:10])}"
              f"{' ...' if len(bad) > 10 else ''} (--strict-data: stop instead)", file=sys.stderr)
    return rows
