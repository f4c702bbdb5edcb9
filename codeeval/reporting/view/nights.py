"""The nightly's view of each model run: `codeeval view`'s site (codeeval/reporting/view/site.py) of
the night's samples/ copy of the run (reporting/paired.py keep_samples), written beside index.html as
views/<night>/<run_id>. Built from the copy, not from the run directory, so that it shows the run as
it was that night after a changed model rewrites its shards. The rows' `view` column names it
(relative to the leaderboard folder) and the page's cells and flipped problems link into it
(reporting/page.py, paired_page.py). With CODEEVAL_STORAGE a URL, site.write puts it in the store
beside the page; it is pruned with the copy it was built from, here and in the store."""
from __future__ import annotations

from pathlib import Path
from typing import Iterable

from codeeval.core.results import LeaderboardRow
from codeeval.reporting.paired import SAMPLES, prune_copies
from codeeval.reporting.view import site

VIEWS = "views"  # under the leaderboard folder: views/<night>/<run_id>/index.html


def keep_view(out: Path, samples: str) -> str:
    """The site of the night's copy `samples` (samples/<night>/<run_id>, relative to `out`), written
    whole to views/<night>/<run_id> (and the store); its path relative to `out`."""
    rel = Path(VIEWS) / Path(samples).relative_to(SAMPLES)
    site.write([out / samples], out / rel)
    return rel.as_posix()


def prune(out: Path, recent: Iterable[list[LeaderboardRow]]) -> list[Path]:
    """Remove the views no row of `recent` (the nights whose copies are kept) names, here and in the store."""
    return prune_copies(out, VIEWS, {r.view for rows in recent for r in rows})
