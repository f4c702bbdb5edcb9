"""The Hugging Face hub: is it reachable, and what does the local HF cache already hold?

Asked before anything loads from the hub. huggingface_hub and datasets retry connection
errors for minutes; an offline machine must instead fail in a second with one line, or
use its local cache without a single retry (HF_HUB_OFFLINE=1, set by `go_offline_if_unreachable`).
"""
from __future__ import annotations

import functools
import os
import re
import urllib.error
import urllib.request
from pathlib import Path
from typing import Optional

from codeeval.core import yes_no
from codeeval.core.environment import restored

PROBE_TIMEOUT_S = 3.0


def endpoint() -> str:
    return os.environ.get("HF_ENDPOINT", "https://huggingface.co").rstrip("/")


def offline_requested() -> bool:
    return any(yes_no.parse(os.environ.get(v, "")) for v in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"))


@functools.lru_cache(maxsize=1)
def _offline_by_user() -> bool:
    """Offline mode as the user set it (first asked before go_offline_if_unreachable sets it)."""
    return offline_requested()


@functools.lru_cache(maxsize=None)
def _probe(url: str, timeout_s: float) -> bool:
    """Any HTTP answer (even an error status) means reachable; urllib honours the proxy variables."""
    try:
        urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=timeout_s).close()
        return True
    except urllib.error.HTTPError:
        return True
    except (urllib.error.URLError, OSError, ValueError):
        return False


def reachable(timeout_s: float = PROBE_TIMEOUT_S) -> bool:
    """True when the hub answers within `timeout_s` and offline mode was not asked for."""
    return not _offline_by_user() and _probe(endpoint() + "/api/models?limit=1", timeout_s)


def repo_status(kind: str, repo_id: str, revision: Optional[str] = None,
                timeout_s: float = PROBE_TIMEOUT_S) -> Optional[int]:
    """HTTP status of the hub's API page for a model or dataset repository (200: it exists,
    404: no such repository, 401/403: gated or private); None when the hub does not answer."""
    url = f"{endpoint()}/api/{kind}s/{repo_id}" + (f"/revision/{revision}" if revision else "")
    request = urllib.request.Request(url, method="HEAD")
    token = os.environ.get("HF_TOKEN") or os.environ.get("HUGGING_FACE_HUB_TOKEN")
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code
    except (urllib.error.URLError, OSError, ValueError):
        return None


OFFLINE_VARIABLES = ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")


def go_offline_if_unreachable() -> bool:
    """Set HF_HUB_OFFLINE=1 and HF_DATASETS_OFFLINE=1 for this process when the hub does not
    answer, so transformers and datasets read their caches without retrying. Effective only
    before huggingface_hub is imported (it reads the variables once). Returns whether offline."""
    if reachable():
        return False
    for name in OFFLINE_VARIABLES:
        os.environ[name] = "1"
    return True


def offline_for_this_run():
    """The offline variables as they were before the run, afterwards (a context manager)."""
    return restored(OFFLINE_VARIABLES)


def _hf_home() -> Path:
    return Path(os.environ.get("HF_HOME") or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
                / "huggingface").expanduser()


def hub_cache() -> Path:
    """Where huggingface_hub keeps downloaded repositories."""
    explicit = os.environ.get("HF_HUB_CACHE") or os.environ.get("HUGGINGFACE_HUB_CACHE")
    return Path(explicit).expanduser() if explicit else _hf_home() / "hub"


def _cached_repo(kind: str, repo_id: str, revision: Optional[str], needed: str) -> bool:
    root = hub_cache() / f"{kind}--{repo_id.replace('/', '--')}"
    snapshots = root / "snapshots"
    if not snapshots.is_dir():
        return False
    if revision:
        ref = root / "refs" / revision
        names = [ref.read_text().strip()] if ref.is_file() else [revision]
    else:
        names = [p.name for p in snapshots.iterdir()]
    return any((snapshots / name / needed).exists() for name in names) if needed else bool(names)


def cached_model(repo_id: str, revision: Optional[str] = None) -> bool:
    """A model repository whose config.json (or a GGUF file) is in the local hub cache."""
    if _cached_repo("models", repo_id, revision, "config.json"):
        return True
    snapshots = hub_cache() / f"models--{repo_id.replace('/', '--')}" / "snapshots"
    return snapshots.is_dir() and any(snapshots.glob("*/*.gguf"))


def cached_dataset(dataset_id: str) -> bool:
    """A dataset that datasets can load offline: in the hub cache, or in datasets' own cache."""
    if _cached_repo("datasets", dataset_id, None, ""):
        return True
    explicit = os.environ.get("HF_DATASETS_CACHE")
    root = Path(explicit).expanduser() if explicit else _hf_home() / "datasets"
    names = {dataset_id.replace("/", "___"), _datasets_cache_name(dataset_id)}
    return root.is_dir() and any(p.name in names or p.name.endswith(tuple("___" + n for n in names))
                                 for p in root.iterdir())


def _datasets_cache_name(dataset_id: str) -> str:
    """The folder datasets caches a hub dataset in: `nuprl/MultiPL-E` -> `nuprl___multi_pl-e`
    (datasets' camelcase_to_snakecase of the name; not imported here, datasets is heavy)."""
    *namespace, name = dataset_id.split("/")
    name = re.sub(r"([a-z\d])([A-Z])", r"\1_\2", re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", name)).lower()
    return "___".join([*namespace, name])


def unreachable_reason() -> str:
    """The clause an error message uses when the hub is out of reach."""
    return ("offline mode is set (HF_HUB_OFFLINE)" if _offline_by_user()
            else f"the HF hub ({endpoint()}) is unreachable")
