"""What a `codeeval view` site holds, read back as the page reads it (data/run.js, and per task its index
chunk with the texts of its blocks joined to the rows by column name), for the tests that check a
family's samples reach the view as their Parquet files hold them; docs/viewer.md's commands; and a
wait for the page in Chromium (tests/team_server.py drives it)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Iterator


def _call(path: Path, name: str):
    text = path.read_text(encoding="ascii")
    prefix = f"codeevalView.{name}("
    assert text.startswith(prefix) and text.endswith(");\n"), path
    return json.loads(text[len(prefix) : -3])


def site_data(site: Path) -> tuple[dict, dict[str, dict]]:
    """(run.js's summary, {task: {"kind", "problems", "runs": [[{column: value}, ...] per run]}})."""
    run = _call(site / "data" / "run.js", "run")
    tasks = {}
    for meta in run["tasks"]:
        chunk = _call(site / "data" / meta["chunk"], "task")
        texts = [[] for _ in chunk["runs"]]
        for _, _, name in chunk["blocks"]:
            for side, rows in enumerate(_call(site / "data" / name, "texts")["runs"]):
                texts[side] += rows
        empty = dict.fromkeys(run["columns"] + run["texts"])  # a row's trailing empty fields are left out
        runs = [
            [{**empty, **dict(zip(run["columns"], row)), **dict(zip(run["texts"], text))}
             for row, text in zip(rows, side_texts)]
            for rows, side_texts in zip(chunk["runs"], texts)
        ]
        tasks[meta["name"]] = {**chunk, "runs": runs}
    return run, tasks


async def settle(page, expression: str = "document.body.hasAttribute('data-rendered')", seconds: float = 30):
    for _ in range(int(seconds / 0.1)):
        if await page.evaluate(expression):
            return
        await asyncio.sleep(0.1)
    shown = await page.evaluate("document.body.innerText")
    raise AssertionError(f"the page never showed {expression}: {(shown or '')[:2000]}")


DOCS = Path(__file__).resolve().parents[1] / "docs" / "viewer.md"


def documented() -> list[str]:
    """The commands of docs/viewer.md's shell blocks, without their comments."""
    blocks = re.findall(r"```\n(.*?)```", DOCS.read_text(), re.S)
    return [line.split("  #")[0].strip() for block in blocks for line in block.splitlines()
            if line.strip().startswith(("codeeval view", "python3 -m http.server"))]


@contextlib.contextmanager
def storage_served(storage: Path, port: int, ready: str) -> Iterator[None]:
    """docs/viewer.md's command that serves the storage root over HTTP, run as written (its port
    `port`, CODEEVAL_STORAGE `storage`) until the block ends; entered once `ready` (a path under the
    root) answers."""
    (command,) = [c for c in documented() if "http.server" in c]
    server = subprocess.Popen(command.replace("python3", sys.executable).replace("8000", str(port)), shell=True,
                              env={**os.environ, "CODEEVAL_STORAGE": str(storage)}, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        for _ in range(100):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/{ready}", timeout=1)
                break
            except OSError:
                time.sleep(0.1)
        yield
    finally:
        os.killpg(server.pid, signal.SIGKILL)
        server.wait()
