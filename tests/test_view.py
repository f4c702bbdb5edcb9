"""`codeeval view` in headless Chromium, on real runs made by the CLI: HumanEval's first problems
executed locally, once by the reference oracle and once by replayed programs that fail, time out,
crash and print hostile text. The page is driven as a person uses it (links, the verdict select,
the search box) through Chromium's DevTools protocol; what it shows is checked against the runs'
Parquet files. Screenshots are kept in .cache/screenshots/view-*.png."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path
from urllib.parse import quote

import pyarrow.parquet as pq
import pytest
from conftest import DATA
from team_server import CHROMIUM, free_port, with_page
from view_data import documented, settle, storage_served

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium package is not installed (make chromium)")

LIMIT = 6
HOSTILE_OUT = (
    '<script>window.pwned=1</script></textarea><img src=x onerror="window.pwned=2">'
    "<b id=injected>bold</b>\x1b[31mred\x1b[0m"
)
# appended to programs of problems 2..5 (sample 0) of run x: each fails, times out or prints hostile text
HOSTILE = {
    2: "\nimport sys\nsys.stderr.write("
    + repr(HOSTILE_OUT)
    + ")\nsys.stdout.write('A' * 1000000)\nsys.stdout.flush()\n"
    "raise IndexError('<i>x</i>')  # " + HOSTILE_OUT + "\n",
    3: "\nwhile True:\n    pass\n",
    4: "\nimport sys\nsys.stdout.buffer.write(b'bad utf8: \\xff\\xfe\\xc3(')\nsys.stdout.flush()\n"
    "raise ValueError('</textarea><script>window.pwned=3</script>')\n",
    5: "\n# " + "B" * 150_000 + "\n",  # a runaway completion: the view cuts it, with a mark
}


def codeeval(*args: str, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    done = subprocess.run(
        [sys.executable, "-m", "codeeval", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=600,
        env={**os.environ, **(env or {})},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def run(cwd: Path, name: str, *args: str, env: dict | None = None) -> Path:
    codeeval(
        "run",
        "--tasks",
        "humaneval",
        "--executor",
        "local",
        "--allow_code_execution",
        "--data-dir",
        str(DATA),
        "--limit",
        str(LIMIT),
        "--n_samples",
        "2",
        "--output-dir",
        str(cwd / name),
        *args,
        cwd=cwd,
        env=env,
    )
    return cwd / name


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("view")
    ref = run(
        root, "ref", "--model", "reference", "--save_generations", "--save_generations_path", str(root / "g.json")
    )
    programs = json.loads((root / "g_humaneval.json").read_text())
    entry = json.loads(pq.read_table(ref / "humaneval" / "problems.parquet").column("record")[0].as_py())["entry_point"]
    programs[0][0] += f"\n\ndef {entry}(*args, **kwargs):\n    return None\n"  # runs, fails its tests
    programs[1][1] += "\nraise SystemExit(3)\n"
    for i, tail in HOSTILE.items():
        programs[i][0] += tail
    (root / "x.json").write_text(json.dumps(programs))
    x = run(root, "x", "--model", "x", "--load_generations_path", str(root / "x.json"))
    return root, ref, x


def executions(run_dir: Path) -> list[dict]:
    return [
        r
        for p in sorted((run_dir / "humaneval" / "executions").glob("*.parquet"))
        for r in pq.read_table(p).to_pylist()
    ]


async def open_page(page, url: str, ready: str) -> None:
    await page.call("Page.navigate", url=url)
    await settle(page)
    await settle(page, ready)


TEXT = "document.getElementById('main').innerText"
COUNT = "(document.getElementById('count') || {}).textContent"


def test_a_run_opens_filters_to_its_failures_and_shows_a_sample(runs, tmp_path):
    """The run's page, its task (metrics as metrics.json has them), the failures by the verdict
    select (the count the Parquet files give, the state in the address), a search, a sample."""
    root, _, x = runs
    done = codeeval("view", str(x), cwd=root)
    index = x / "view" / "index.html"
    assert done.stdout.strip() == f"view: {index}"
    rows = executions(x)
    failing = [r for r in rows if not r["passed"]]
    metrics = json.loads((x / "humaneval" / "metrics.json").read_text())

    async def drive(page):
        await open_page(page, index.as_uri(), "document.querySelector('main table') !== null")
        first = await page.evaluate(TEXT)
        await page.screenshot("view-run.png")
        await page.evaluate("[...document.querySelectorAll('main a')].find(a => a.textContent === 'humaneval').click()")
        await settle(page, "document.getElementById('samples') !== null")
        task = await page.evaluate(TEXT)
        await page.evaluate(
            "const s = document.getElementById('verdict'); s.value = 'failed';s.dispatchEvent(new Event('change'))"
        )
        failed = await page.evaluate(COUNT), await page.evaluate("location.hash")
        shown = await page.evaluate(
            "[...document.querySelectorAll('#samples tr[data-sample]')].map(r => r.dataset.sample)"
        )
        await page.screenshot("view-failures.png")
        # the address alone shows the same view
        await open_page(page, index.as_uri() + failed[1], "document.getElementById('samples') !== null")
        again = await page.evaluate(COUNT)
        await page.evaluate(
            "const q = document.getElementById('q'); q.value = 'IndexError';q.dispatchEvent(new Event('input'))"
        )
        searched = await page.evaluate(
            "[...document.querySelectorAll('#samples tr[data-sample]')].map(r => r.dataset.sample)"
        )
        await page.evaluate("document.querySelector('#samples tr[data-sample] a').click()")
        await settle(page, "document.querySelector('dl.facts') !== null")
        sample = await page.evaluate(TEXT), await page.evaluate("location.hash")
        await page.screenshot("view-sample.png")
        return first, task, failed, shown, again, searched, sample

    first, task, (count, fragment), shown, again, searched, (sample, sample_hash) = with_page(
        tmp_path, "chromium", drive
    )
    assert f"pass@1 {metrics['metrics']['pass@1']:.4f}" in first
    low, high = metrics["ci95"]["pass@1"]
    assert f"[{low:.4f}, {high:.4f}]" in first and f"failed {metrics['statuses']['failed']}" in first
    assert "pass@1 (headline)" in task and "HumanEval/0 1/2" in task
    assert count == again == f"{len(failing)} of {len(rows)} samples"
    assert fragment == "#task=humaneval&verdict=failed"
    assert sorted(shown) == sorted(f"{r['task_id']}:{r['sample']}" for r in failing)
    assert searched == ["HumanEval/2:0"]
    assert sample_hash == "#task=humaneval&verdict=failed&q=IndexError&sample=HumanEval%2F2%3A0"
    row = next(r for r in rows if (r["task_id"], r["sample"]) == ("HumanEval/2", 0))
    assert row["status"] == "failed" and f"exit code\n{row['exit_code']}" in sample.replace("\t", "\n")
    assert "IndexError: <i>x</i>" in sample and "Completion as executed" in sample and "Tests" in sample


def test_hostile_samples_are_shown_as_text(runs, tmp_path):
    """Markup, a closing textarea, ANSI escapes, a 1 MB stdout, invalid UTF-8 and a 150,000-character
    completion: each shown as text (no script runs, no element is injected), the long ones cut
    with a visible mark."""
    root, _, x = runs
    index = Path(codeeval("view", str(x), cwd=root).stdout.split("view: ", 1)[1].strip())

    async def drive(page):
        out = {}
        for n in (2, 4, 5):
            await open_page(
                page,
                index.as_uri() + "#task=humaneval&sample=" + quote(f"HumanEval/{n}:0", safe=""),
                "document.querySelector('dl.facts') !== null",
            )
            out[n] = {
                "text": await page.evaluate(TEXT),
                "pwned": await page.evaluate("window.pwned === undefined ? null : window.pwned"),
                "injected": await page.evaluate(
                    "document.querySelectorAll('#injected, main img, main b, main i, main textarea').length"
                ),
                "scripts": await page.evaluate("[...document.scripts].map(s => s.getAttribute('src'))"),
            }
            await page.screenshot(f"view-hostile-{n}.png")
        return out

    seen = with_page(tmp_path, "chromium", drive)
    for n, page in seen.items():
        assert page["pwned"] is None and page["injected"] == 0, (n, page)
        assert page["scripts"][:3] == ["app.js", "data/run.js", "data/task-000.js"], page["scripts"]
        assert all(src.startswith("data/task-000-t") for src in page["scripts"][3:]), page["scripts"]
    assert "<script>window.pwned=1</script></textarea><img src=x" in seen[2]["text"]
    assert "␛[31mred␛[0m" in seen[2]["text"]  # the escape character as its picture, not a colour
    assert "earlier output dropped: the sandbox keeps the last 2048 bytes" in seen[2]["text"]
    assert "bad utf8: \ufffd\ufffd\ufffd(" in seen[4]["text"]
    assert "</textarea><script>window.pwned=3</script>" in seen[4]["text"]
    assert "[cut by the view: " in seen[5]["text"] and "the first 100,000 shown]" in seen[5]["text"]
    assert "B" * 150_000 not in seen[5]["text"]


def test_two_runs_side_by_side_with_the_flips_both_ways(runs, tmp_path):
    """A and B: the paired test of `codeeval compare` at the top, the flips each way as the Parquet
    files give them, a flipped sample's two columns and the diff of its completions."""
    root, ref, x = runs
    index = Path(codeeval("view", str(x), str(ref), cwd=root).stdout.split("view: ", 1)[1].strip())
    assert index == x / f"view-vs-{json.loads((ref / 'run.json').read_text())['run_id']}" / "index.html"
    passed_a = {(r["task_id"], r["sample"]): r["passed"] for r in executions(x)}
    passed_b = {(r["task_id"], r["sample"]): r["passed"] for r in executions(ref)}
    up = sorted(f"{t}:{s}" for (t, s), p in passed_a.items() if not p and passed_b[(t, s)])
    compared = codeeval("compare", str(x), str(ref), cwd=root).stdout

    async def drive(page):
        await open_page(
            page, index.as_uri() + "#task=humaneval&verdict=fail-pass", "document.getElementById('samples') !== null"
        )
        rows = await page.evaluate(
            "[...document.querySelectorAll('#samples tr[data-sample]')].map(r => r.dataset.sample)"
        )
        marks = await page.evaluate("[...document.querySelectorAll('#samples td.flip-up')].length")
        top = await page.evaluate(TEXT)
        await page.screenshot("view-ab-flips.png")
        await open_page(
            page, index.as_uri() + "#task=humaneval&verdict=pass-fail", "document.getElementById('samples') !== null"
        )
        down = await page.evaluate(COUNT)
        await open_page(
            page,
            index.as_uri() + "#task=humaneval&sample=" + quote("HumanEval/0:0", safe=""),
            "document.querySelector('pre.diff') !== null",
        )
        sample = await page.evaluate(TEXT)
        diff = await page.evaluate(
            "[...document.querySelectorAll('pre.diff .del, pre.diff .ins')].map(e => e.textContent)"
        )
        await page.screenshot("view-ab-sample.png")
        return rows, marks, top, down, sample, diff

    rows, marks, top, down, sample, diff = with_page(tmp_path, "chromium", drive)
    assert sorted(rows) == up and marks == len(up) > 0
    assert down.startswith("0 of ")
    line = next(line for line in compared.splitlines() if line.startswith("humaneval: pass@1"))
    assert float(top.split("p = ")[1].split()[0]) == pytest.approx(float(line.split("p=")[1].split()[0]), rel=1e-3)
    assert "fails in A, passes in B" in sample and "A: x" in sample and "B: reference" in sample
    assert diff and all(d.startswith("- ") for d in diff)  # B is A without the appended lines


def test_a_view_served_from_a_url_store(runs, tmp_path):
    """A run in a URL store (CODEEVAL_STORAGE=file://...), viewed on a host that holds none of it:
    `codeeval view <run id>` fetches the run, writes its view and puts it in the store; the
    store's folder served over HTTP (docs/viewer.md's one command) shows it."""
    root, ref, _ = runs
    store = tmp_path / "store"
    run_id = json.loads((ref / "run.json").read_text())["run_id"]
    shutil.copytree(ref, store / run_id, ignore=shutil.ignore_patterns("view*"))
    env = {"CODEEVAL_STORAGE": store.as_uri(), "CODEEVAL_CACHE": str(tmp_path / "other-host")}
    done = codeeval("view", run_id, cwd=tmp_path, env=env)
    assert str(tmp_path / "other-host") in done.stdout
    assert (store / run_id / "view" / "index.html").is_file() and (
        store / run_id / "view" / "data" / "task-000.js"
    ).is_file()
    port = free_port()
    url = f"http://127.0.0.1:{port}/{run_id}/view/index.html"

    async def drive(page):
        await open_page(page, url + "#task=humaneval&verdict=passed", "document.getElementById('samples') !== null")
        await page.screenshot("view-url-store.png")
        return await page.evaluate(COUNT)

    with storage_served(store, port, f"{run_id}/view/index.html"):  # on the storage host
        count = with_page(tmp_path, "chromium", drive)
    assert count == f"{LIMIT * 2} of {LIMIT * 2} samples"


def test_the_documented_commands_run_as_written(runs, tmp_path):
    """docs/viewer.md's `codeeval view` lines, RUN, RUN_A, RUN_B and DIR standing for real runs and a
    folder: each writes the site it says, where it says; --serve serves it until Ctrl-C."""
    root, ref, x = runs
    commands = [c for c in documented() if c.startswith("codeeval view")]
    assert len(commands) == 4, commands
    for command in commands:
        argv = command.replace("RUN_A", str(x)).replace("RUN_B", str(ref)).replace("RUN", str(x))
        argv = argv.replace("DIR", str(tmp_path / "elsewhere")).split()[2:]
        if "--serve" not in argv:
            printed = Path(codeeval("view", *argv, cwd=tmp_path).stdout.split("view: ", 1)[1].strip())
            assert printed.is_file() and (printed.parent / "data" / "run.js").is_file(), command
            continue
        served = subprocess.Popen([sys.executable, "-m", "codeeval", "view", *argv], cwd=tmp_path, text=True,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            assert served.stdout.readline().startswith("view: ")
            line = served.stdout.readline()
            url = re.search(r"http://127\.0\.0\.1:\d+/index\.html", line).group(0)
            page = urllib.request.urlopen(url, timeout=10).read().decode()
            data = urllib.request.urlopen(url.replace("index.html", "data/run.js"), timeout=10).read().decode()
            assert "app.js" in page and data.startswith("codeevalView.run(")
        finally:
            served.send_signal(signal.SIGINT)
            assert served.wait(timeout=30) == 0, served.stderr.read()


def test_a_run_that_is_not_there_is_one_line(tmp_path):
    done = subprocess.run([sys.executable, "-m", "codeeval", "view", str(tmp_path / "nothing")], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 2 and done.stderr == f"codeeval: error: no run at {tmp_path / 'nothing'}\n"
