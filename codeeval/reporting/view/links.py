"""The view's addresses, spelled in one place: the site's entry file and the fragment that selects
what it shows. The page keeps its whole state (task, filters, search, the open sample) in the
fragment, so a link shows the same view, from a file or from any static web server.

    index.html#task=humaneval&verdict=failed&problem=HumanEval%2F3&q=IndexError&sample=HumanEval%2F3%3A5
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping, Optional
from urllib.parse import quote

from codeeval.core import storage

ENTRY = "index.html"
VIEW_DIR = "view"  # where a run's own view lives: <run>/view/index.html
KEYS = ("task", "verdict", "problem", "q", "sample")  # the fragment's keys, in the order written


def sample_key(task_id: str, sample: int) -> str:
    """A sample's name in the fragment: `<task_id>:<sample index>`."""
    return f"{task_id}:{sample}"


def fragment(
    task: Optional[str] = None,
    verdict: Optional[str] = None,
    problem: Optional[str] = None,
    q: Optional[str] = None,
    sample: Optional[tuple[str, int]] = None,
) -> str:
    """`#task=...&...` for the view's state ("" for the run's first page). `verdict` is a status or one
    of "passed", "failed"; `sample` is (task_id, sample index) and opens that sample's page."""
    values = {
        "task": task,
        "verdict": verdict,
        "problem": problem,
        "q": q,
        "sample": sample_key(*sample) if sample is not None else None,
    }
    parts = [f"{k}={quote(str(values[k]), safe='')}" for k in KEYS if values[k] not in (None, "")]
    return "#" + "&".join(parts) if parts else ""


def href(site: str, **state) -> str:
    """The address of a view state inside the site at `site` (a relative folder or a URL)."""
    return f"{site.rstrip('/')}/{ENTRY}{fragment(**state)}"


URL_VARIABLE = "CODEEVAL_VIEW_URL"  # the storage root as a team serves it over HTTP (docs/viewer.md)


def run_site(root: Path, env: Optional[Mapping[str, str]] = None) -> Optional[str]:
    """The address of the run's own view for the Prefect UI's links: CODEEVAL_VIEW_URL plus the run's
    place under the storage root; None when the variable is unset or the run lies elsewhere."""
    env = os.environ if env is None else env
    base = env.get(URL_VARIABLE, "").rstrip("/")
    if not base:
        return None
    try:
        place = Path(os.path.abspath(root)).relative_to(Path(os.path.abspath(storage.root(env))))
    except ValueError:
        return None
    return f"{base}/{place.as_posix()}/{VIEW_DIR}"
