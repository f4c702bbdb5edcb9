"""What a run waits for, said where a person looks: `<task>/waits/<stage>-shard-NNNNN.json`
(artifacts.RunLayout.wait_record).

A shard that waits long for a repository's slot (codeeval/tasks/slots.py) leaves a record here
(what it waits for, since when, who holds it, which process waits); taking the slot removes it.
`codeeval inspect RUN` lists the records whose waiting process still runs, and names the others
as left by a run that was stopped.
"""
from __future__ import annotations

import json
import time
from dataclasses import asdict
from pathlib import Path
from typing import Sequence

from codeeval.core import artifacts
from codeeval.core.processes import ProcessName


def write(path: Path, *, run: str, limits: Sequence[str], what: str, since: float, waiter: ProcessName,
          holders: str) -> None:
    artifacts.write_json(path, {"run_name": run, "limits": list(limits), "waits_for": what,
                                "since": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(since)),
                                "waiter": asdict(waiter), "holders": holders})


def clear(path: Path) -> None:
    path.unlink(missing_ok=True)


def report_lines(folder: Path) -> list[str]:
    """One line per wait record in a task's `folder` (RunLayout.waits), for `codeeval inspect`."""
    lines = []
    for path in sorted(folder.glob("*.json")):
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
            waiter = ProcessName(**record["waiter"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
        state = {True: f"waiting now ({waiter})", False: f"its process ({waiter}) is gone: the run was stopped",
                 None: f"waiting on another host ({waiter})"}[waiter.alive()]
        lines.append(f"- {record['run_name'] or path.stem} has waited for {record['waits_for']} since "
                     f"{record['since']}, {state}; {record['holders']}")
    return lines
