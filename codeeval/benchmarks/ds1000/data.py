"""Reading DS-1000 in either upstream format, without downloads.

* The 2022 format (HKUNLP/DS-1000 @49c1c543 `ds1000_data.zip`, what bigcode downloads into its
  installed package): `<data_dir>/ds1000/ds1000_data/<Lib>/<Completion|Insertion>/q<N>/` (or
  `<data_dir>/ds1000_data/...`), problems sorted by N, libraries in DS1000Dataset's order. Each
  folder's files travel in the record (base64), so that the sandbox can rebuild the folder.
* The current format (xlang-ai/DS-1000 `data/ds1000.jsonl[.gz]`; HF `xlangai/DS-1000`, split
  `test`): one record per problem with `prompt`, `reference_code`, `metadata`, `code_context`.
  It has no insertion prompts.
Records are normalised to one shape: `format` ("2022" | "2024"), `lib`, `problem_id`, `prompt`,
`reference_code`, `code_context`, `test_type`, `test_case_cnt`, `perturbation_type`,
`perturbation_origin_id` and, for 2022, `files`.
"""
from __future__ import annotations

import base64
import configparser
from pathlib import Path
from typing import Optional

from codeeval.benchmarks.data import check_record, load_hf, read_jsonl
from codeeval.benchmarks.spec import LoadOptions
from codeeval.core.errors import UsageError

LIBS = ("Pandas", "Numpy", "Matplotlib", "Tensorflow", "Scipy", "Sklearn", "Pytorch")  # DS1000Dataset's order
TEXT_FILES = ("reference_code.txt", "test_code.py", "code_context.txt", "test_generate_pickle.py", "prompt.txt")
HF_DATASET = "xlangai/DS-1000"


def _old_root(data_dir: Path) -> Optional[Path]:
    for root in (data_dir / "ds1000" / "ds1000_data", data_dir / "ds1000_data"):
        if root.is_dir():
            return root
    return None


def _new_file(data_dir: Path) -> Optional[Path]:
    for base in (data_dir / "ds1000", data_dir):
        for name in ("ds1000.jsonl.gz", "ds1000.jsonl"):
            if (base / name).is_file():
                return base / name
    return None


def old_problem(folder: Path, lib: str) -> dict:
    """One q<N> folder (DS1000Problem's fields) as a record."""
    cfg = configparser.RawConfigParser()
    if not cfg.read(folder / ".cfg"):
        raise UsageError(f"DS-1000 problem {folder} has no .cfg")
    try:
        meta = {key: cfg.get(section, key) for section, key in (
            ("library", "lib"), ("test", "test_type"), ("test", "test_case_cnt"),
            ("perturbation", "perturbation_type"), ("perturbation", "perturbation_origin_id"))}
        text = {name.split(".")[0]: (folder / name).read_text(encoding="utf-8") for name in TEXT_FILES}
    except (configparser.Error, OSError) as exc:
        raise UsageError(f"DS-1000 problem {folder} is malformed: {exc}") from None
    if text["code_context"].count("[insert]") < 1:
        raise UsageError(f"DS-1000 problem {folder}: code_context.txt has no [insert]")
    files = {p.relative_to(folder).as_posix(): base64.b64encode(p.read_bytes()).decode()
             for p in sorted(folder.rglob("*")) if p.is_file()}
    return {"format": "2022", "lib": lib, "problem_id": int(folder.name.removeprefix("q")),
            "prompt": text["prompt"], "reference_code": text["reference_code"], "code_context": text["code_context"],
            "test_type": int(meta["test_type"]), "test_case_cnt": int(meta["test_case_cnt"]),
            "perturbation_type": meta["perturbation_type"], "perturbation_origin_id": meta["perturbation_origin_id"],
            "files": files}


def load_old(root: Path, libs: tuple[str, ...], mode: str) -> list[dict]:
    records = []
    for lib in libs:
        source = root / lib / mode
        if not source.is_dir():
            raise UsageError(f"no DS-1000 {lib} {mode} problems: {source} is missing")
        folders = sorted((p for p in source.iterdir() if p.is_dir() and p.name.startswith("q")),
                         key=lambda p: int(p.name.removeprefix("q")))
        records += [old_problem(f, lib) for f in folders]
    return records


def new_record(row: dict, n: int) -> dict:
    check_record(row, {"prompt": str, "reference_code": str, "code_context": str, "metadata": dict},
                 f"DS-1000 record {n}")
    try:
        meta = row["metadata"]
        # problem_id: the per-library number (the 2022 folder's q<N>); the file's own id is kept too
        return {"format": "2024", "lib": meta["library"], "problem_id": int(meta["library_problem_id"]),
                "dataset_id": int(meta["problem_id"]),
                "prompt": row["prompt"], "reference_code": row["reference_code"], "code_context": row["code_context"],
                "test_type": 0, "test_case_cnt": int(meta["test_case_cnt"]),
                "perturbation_type": meta["perturbation_type"],
                "perturbation_origin_id": str(meta["perturbation_origin_id"])}
    except (KeyError, TypeError, ValueError) as exc:
        raise UsageError(f"DS-1000 record {n} is malformed: {type(exc).__name__} {exc}") from None


def load_records(options: LoadOptions, libs: tuple[str, ...], mode: str) -> list[dict]:
    """Problems of `libs` (in that order) for mode Completion or Insertion."""
    if options.data_dir is not None:
        if not options.data_dir.is_dir():
            raise UsageError(f"data dir not found: {options.data_dir}")
        root = _old_root(options.data_dir)
        if root is not None:
            return load_old(root, libs, mode)
        rows = _new_file(options.data_dir)
        if rows is None:
            raise UsageError(f"no DS-1000 data in {options.data_dir}: expected ds1000/ds1000_data/<Lib>/<Mode>/q<N>/ "
                             "(the 2022 format) or ds1000/ds1000.jsonl[.gz] (xlang-ai's format)")
        records = [new_record(r, n) for n, r in enumerate(read_jsonl(rows))]
    else:
        records = [new_record(r, n) for n, r in enumerate(load_hf(
            HF_DATASET, "test", local_hint="ds1000/ds1000_data/ (2022) or ds1000/ds1000.jsonl.gz"))]
    if mode == "Insertion":
        raise UsageError("DS-1000 insertion prompts exist only in the 2022 format: pass --data-dir with "
                         "ds1000/ds1000_data/<Lib>/Insertion/")
    return [r for lib in libs for r in records if r["lib"] == lib]
