"""Where a repo-level benchmark's files are: data.jsonl, prompt elements, the Source_Code tree.

Source_Code root: --source-code-root, else $CODEEVAL_<FAMILY>_SOURCE_CODE, else
`<data dir>/<family>/Source_Code` (Dependency_Data likewise).
A project is either a folder `<root>/<project>` (patched in place, as the references do) or a
tarball `<root>/<project>.tar.gz` (../shared/data/deveval ships them), extracted once into
`$CODEEVAL_CACHE/source-code/<sha256 of the tarball>/` and patched there.
"""
from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import tarfile
from pathlib import Path
from typing import Optional

from codeeval.benchmarks.data import read_jsonl
from codeeval.core.cache import cache_root
from codeeval.core.errors import UsageError
from codeeval.executors.repo.tree import write_manifest


def _tree_setting(flag: str, variable: str, folder: str, data_dir: Optional[Path], given: Optional[Path],
                  env_must_exist: bool) -> Optional[Path]:
    """The flag, else the environment variable, else <data dir>/<family>/<folder>, else None."""
    if given is not None:
        if not given.is_dir():
            raise UsageError(f"{flag} {given}: not a folder")
        return given
    env = os.environ.get(variable)
    if env:
        root = Path(env).expanduser()
        if env_must_exist and not root.is_dir():
            raise UsageError(f"{variable}={env}: not a folder")
        return root
    if data_dir is not None and (data_dir / folder).is_dir():
        return data_dir / folder
    return None


def source_root_setting(family: str, data_dir: Optional[Path], given: Optional[Path] = None) -> Optional[Path]:
    """--source-code-root, else $CODEEVAL_<FAMILY>_SOURCE_CODE, else <data dir>/<family>/Source_Code."""
    return _tree_setting("--source-code-root", f"CODEEVAL_{family.upper()}_SOURCE_CODE", f"{family}/Source_Code",
                         data_dir, given, env_must_exist=True)


def dependency_root_setting(family: str, data_dir: Optional[Path], given: Optional[Path] = None) -> Optional[Path]:
    """--dependency-data-root, else $CODEEVAL_<FAMILY>_DEPENDENCY_DATA, else <data dir>/<family>/Dependency_Data."""
    return _tree_setting("--dependency-data-root", f"CODEEVAL_{family.upper()}_DEPENDENCY_DATA",
                         f"{family}/Dependency_Data", data_dir, given, env_must_exist=False)


def read_data(family: str, data_dir: Optional[Path]) -> list[dict]:
    """data.jsonl (or data.tar.gz holding it, as DevEval releases it)."""
    if data_dir is None:
        raise UsageError(f"{family} needs --data-dir holding {family}/data.jsonl (the upstream file)")
    base = data_dir / family
    if (base / "data.jsonl").is_file():
        rows = read_jsonl(base / "data.jsonl")
    elif (base / "data.tar.gz").is_file():
        with tarfile.open(base / "data.tar.gz") as tar:
            member = next((m for m in tar.getmembers() if Path(m.name).name == "data.jsonl"), None)
            if member is None:
                raise UsageError(f"{base / 'data.tar.gz'} holds no data.jsonl")
            text = tar.extractfile(member).read().decode("utf-8")
            rows = [json.loads(line) for line in io.StringIO(text) if line.strip()]
    else:
        raise UsageError(f"no {family} data in {data_dir}: expected {family}/data.jsonl or {family}/data.tar.gz")
    needed = ("namespace", "completion_path", "body_position", "signature_position", "indent", "tests")
    for i, row in enumerate(rows):
        missing = [k for k in needed if k not in row]
        if missing:
            raise UsageError(f"malformed {family} data.jsonl record {i + 1}: missing {', '.join(missing)}")
    return rows


def read_prompt_elements(family: str, data_dir: Optional[Path], setting: str) -> dict[str, dict]:
    names = ["prompt_elements.jsonl", "LM_prompt_elements.jsonl", "prompt/prompt_elements.jsonl"]
    for name in names:
        if data_dir is not None and (data_dir / family / name).is_file():
            return {r["namespace"]: r for r in read_jsonl(data_dir / family / name)}
    raise UsageError(f"{family} setting {setting} needs {family}/prompt_elements.jsonl (upstream format) "
                     f"in --data-dir")


def _extract(tarball: Path) -> Path:
    digest = hashlib.sha256(tarball.read_bytes()).hexdigest()[:24]
    target = cache_root() / "source-code" / digest
    if (target / ".complete").is_file():
        return target
    tmp = target.with_name(f".{digest}.{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    with tarfile.open(tarball) as tar:
        tar.extractall(tmp, filter="data")
    write_manifest(tmp)  # the pristine paths: what tests leave is swept (codeeval/executors/repo/tree.py)
    (tmp / ".complete").write_text(str(tarball) + "\n")
    try:
        tmp.rename(target)
    except OSError:  # extracted meanwhile by another process
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def project_root(root: Path, project: str) -> Optional[Path]:
    """The Source_Code root that holds `project` as a folder (extracting its tarball), or None."""
    if (root / project).is_dir():
        if not os.access(root / project, os.W_OK):
            raise UsageError(f"{root / project} is not writable: completions are patched into the Source_Code "
                             "tree in place (copy it, or give the projects as <project>.tar.gz)")
        return root
    tarball = root / f"{project}.tar.gz"
    if tarball.is_file():
        return _extract(tarball)
    return None
