"""A real Prefect server for the team-mode tests, as docs/deployment.md starts one: the documented
script (scripts/prefect-server.sh, `codeeval server start` in a checkout) on a free port with its
own PREFECT_HOME, on SQLite or on PostgreSQL (scripts/postgres.sh), the deployments applied by
`codeeval deploy` with a copy of the checkout as the directory workers start flow runs in.
What the tests own, they stop: the server, the workers (SIGINT or SIGTERM first: they must stop
within STOP_S), the database cluster. A server whose log holds an ERROR line or a traceback fails the
test that used it."""
from __future__ import annotations

import asyncio
import base64
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

REPO = Path(__file__).resolve().parents[1]
PREFECT = str(Path(sys.executable).with_name("prefect"))
CODEEVAL = str(Path(sys.executable).with_name("codeeval"))
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
SCREENSHOTS = REPO / ".cache" / "screenshots"  # kept after the run (CI keeps the clone's .cache)
STOP_S = 10.0  # a worker stops within this long of SIGTERM (docs/deployment.md)
ERROR_LINE = re.compile(r"\|\s*ERROR\s*\||^Traceback \(most recent call last\)|database is locked", re.M)


def credential(prefect_home: Path) -> str:
    """The API credential scripts/prefect-server.sh made (owner-only file in PREFECT_HOME)."""
    path = prefect_home / "api-credential"
    assert path.stat().st_mode & 0o077 == 0, f"{path} is readable by others"
    return path.read_text().strip()


def basic_auth(auth_string: str) -> str:
    return "Basic " + base64.b64encode(auth_string.encode()).decode()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_http(url: str, timeout: float, log: Path) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(url, timeout=2)
            return
        except OSError:
            time.sleep(0.5)
    raise AssertionError(f"{url} did not answer in {timeout:.0f} s: " + log.read_text()[-3000:])


@dataclass
class Server:
    env: dict
    tmp: Path
    project: Path
    database: str
    procs: list = field(default_factory=list)
    workers: list = field(default_factory=list)

    @property
    def ui(self) -> str:
        return self.env["PREFECT_API_URL"].removesuffix("/api")

    def start(self, *args: str, log: str, extra_env: dict | None = None) -> subprocess.Popen:
        command = list(args) if args[0].endswith(".sh") else [PREFECT, *args]
        proc = subprocess.Popen(command, env={**self.env, **(extra_env or {})}, cwd=self.project,
                                start_new_session=True, stdout=open(self.tmp / log, "w"), stderr=subprocess.STDOUT)
        self.procs.append(proc)
        if args[:2] == ("worker", "start"):
            self.workers.append((proc, self.tmp / log))
        return proc

    def cli(self, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
        return subprocess.run([PREFECT, *args], env=self.env, cwd=self.project, capture_output=True, text=True,
                              timeout=timeout)

    def authorize(self) -> str:
        """Carry the credential the server made at its first start (scripts/prefect-server.sh), as a
        team member does: every client, worker and `prefect` command of the test then has it."""
        self.env["PREFECT_API_AUTH_STRING"] = credential(Path(self.env["PREFECT_HOME"]))
        return self.env["PREFECT_API_AUTH_STRING"]

    def api(self, path: str, body: dict | None = None, method: str = "POST"):
        headers = {"Content-Type": "application/json"}
        if self.env.get("PREFECT_API_AUTH_STRING"):
            headers["Authorization"] = basic_auth(self.env["PREFECT_API_AUTH_STRING"])
        request = urllib.request.Request(self.env["PREFECT_API_URL"] + path, method=method,
                                         data=json.dumps(body).encode() if body is not None else None,
                                         headers=headers)
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.loads(response.read() or b"null")

    def flow_runs(self, **flow_run_filter) -> list[dict]:
        return self.api("/flow_runs/filter", {"flow_runs": flow_run_filter})

    def deploy(self, *options: str, working_dir: bool = True) -> None:
        """The pools and the package's deployments, as docs/deployment.md does it (`codeeval deploy`),
        with the copy of the checkout as the flow runs' directory unless not `working_dir` (then each
        starts in a fresh one): its models.yaml is the nightly's."""
        where = ["--working-dir", str(self.project)] if working_dir else []
        deployed = subprocess.run([CODEEVAL, "deploy", "--models-file", str(self.project / "models.yaml"), *where,
                                   *options], env=self.env, cwd=self.tmp, capture_output=True, text=True, timeout=300)
        assert deployed.returncode == 0, deployed.stdout + deployed.stderr

    def kill_all(self) -> None:
        """SIGKILL to the process group of everything the test started, then reap it."""
        for proc in self.procs:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()

    def log_errors(self) -> list[str]:
        text = (self.tmp / "server.log").read_text(errors="replace")
        return [line for line in text.splitlines() if ERROR_LINE.search(line)]

    def stop_workers(self) -> dict[str, float]:
        """SIGINT (Ctrl-C) to the gpu workers' process groups, SIGTERM (a service manager's stop) to
        the others'; how long each took to exit."""
        took = {}
        for proc, log in self.workers:
            if proc.poll() is not None:
                continue
            start = time.monotonic()
            os.killpg(proc.pid, signal.SIGINT if "gpu" in log.name else signal.SIGTERM)
            try:
                proc.wait(timeout=STOP_S + 20)
            except subprocess.TimeoutExpired:
                pass
            took[log.name] = time.monotonic() - start
        return took


def start_postgres(tmp: Path) -> tuple[dict, Callable[[], None]]:
    """scripts/postgres.sh on a free port with a data directory of its own; its stop."""
    port = free_port()
    data = Path(f"/var/lib/postgresql/codeeval-test-{uuid.uuid4().hex[:8]}") if os.getuid() == 0 else tmp / "pg"
    env = {**os.environ, "PGPORT": str(port), "PGDATA": str(data)}
    made = subprocess.run(["bash", str(REPO / "scripts" / "postgres.sh")], env=env, capture_output=True,
                          text=True, timeout=600)
    assert made.returncode == 0, made.stderr[-3000:]
    (setting,) = [line for line in made.stdout.splitlines() if line.startswith("PREFECT_SERVER_DATABASE_")]
    name, _, url = setting.partition("=")

    def stop() -> None:
        subprocess.run(["bash", str(REPO / "scripts" / "postgres.sh"), "stop"], env=env, capture_output=True,
                       timeout=120)
        shutil.rmtree(data, ignore_errors=True)

    return {name: url}, stop


def copy_checkout(project: Path) -> None:
    shutil.copytree(REPO, project, ignore=shutil.ignore_patterns(".venv", ".git", ".cache", "runs", "__pycache__",
                                                                 ".prefect", "leaderboard", ".postgres"))
    (project / ".cache").mkdir()
    models = REPO / ".cache" / "models"
    if models.is_dir():  # hard links, not a link to the checkout: a worker's data root holds them itself
        shutil.copytree(models, project / ".cache" / "models", copy_function=_link_or_copy)


def _link_or_copy(source: str, target: str) -> None:
    try:
        os.link(source, target)
    except OSError:  # another file system
        shutil.copy2(source, target)


def keep_screenshot(path: Path) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    shutil.copy(path, SCREENSHOTS / path.name)


def chromium_page(url: str, tmp: Path, name: str) -> str:
    """The page as headless Chromium renders it (its DOM), with a screenshot kept (SCREENSHOTS)."""
    base = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
            f"--user-data-dir={tmp / 'chromium-profile'}", "--virtual-time-budget=20000", "--window-size=1400,1000"]
    shot = subprocess.run([*base, f"--screenshot={tmp / name}", url], capture_output=True, timeout=180, cwd=tmp)
    assert shot.returncode == 0 and (tmp / name).stat().st_size > 10_000, shot.stderr[-2000:]
    keep_screenshot(tmp / name)
    return subprocess.run([*base, "--dump-dom", url], capture_output=True, text=True, timeout=180).stdout


class Page:
    """One page of a headless Chromium, driven through its DevTools protocol."""

    def __init__(self, ws, tmp: Path):
        self.ws, self.tmp, self.ids = ws, tmp, iter(range(1, 10 ** 6))

    async def call(self, method: str, **params) -> dict:
        n = next(self.ids)
        await self.ws.send(json.dumps({"id": n, "method": method, "params": params}))
        while (message := json.loads(await self.ws.recv())).get("id") != n:
            pass
        return message.get("result", {})

    async def evaluate(self, expression: str):
        return (await self.call("Runtime.evaluate", expression=expression, returnByValue=True))["result"].get("value")

    async def screenshot(self, name: str) -> None:
        """Kept beside the test's files and in SCREENSHOTS."""
        (self.tmp / name).write_bytes(base64.b64decode((await self.call("Page.captureScreenshot", format="png"))["data"]))
        keep_screenshot(self.tmp / name)


def with_page(tmp: Path, profile: str, drive):
    """Start headless Chromium, run `await drive(page)` on its page, stop it; drive's result."""
    import websockets

    port = free_port()
    proc = subprocess.Popen([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                             f"--user-data-dir={tmp / profile}", f"--remote-debugging-port={port}",
                             "--window-size=1400,1000", "about:blank"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    async def connect():
        deadline = time.monotonic() + 60
        while True:
            try:
                pages = json.loads(urllib.request.urlopen(f"http://127.0.0.1:{port}/json", timeout=2).read())
                break
            except OSError:
                assert time.monotonic() < deadline, "chromium's DevTools did not answer"
                await asyncio.sleep(0.3)
        (page,) = [p for p in pages if p["type"] == "page"][:1]
        async with websockets.connect(page["webSocketDebuggerUrl"], max_size=64 << 20) as ws:
            return await drive(Page(ws, tmp))

    try:
        return asyncio.run(connect())
    finally:
        proc.kill()
        proc.wait()


def chromium_ui(srv: "Server", path: str, name: str, click: str | None = None) -> str:
    """A page of the server's UI as its user sees it: logged in with the test's credential (the UI
    keeps it in localStorage, as its login form does), then `path`, then a click on the element
    whose text is `click` (the Prefect UI ignores a ?tab= in the address); the page's text and
    its DOM, a screenshot kept."""
    select = ("(() => { const el = [...document.querySelectorAll('button, a, [role=tab], li, div')].reverse()"
              f".find(e => e.textContent.trim() === {json.dumps(click)}); if (el) {{ el.click(); return true; }}"
              " return false; })()")

    async def drive(page: Page) -> str:
        await page.call("Page.navigate", url=srv.ui)
        for _ in range(60):
            if await page.evaluate("document.readyState === 'complete'"):
                break
            await asyncio.sleep(0.5)
        await page.evaluate(f"localStorage.setItem('prefect-password', btoa({json.dumps(srv.env['PREFECT_API_AUTH_STRING'])}))")
        await page.call("Page.navigate", url=srv.ui + path)
        for _ in range(120):
            await asyncio.sleep(0.5)
            if await page.evaluate(select if click else "document.readyState === 'complete'"):
                break
        await asyncio.sleep(5)  # the content loads from the API
        await page.screenshot(name)
        return await page.evaluate("document.body.innerText + '\\n' + document.documentElement.outerHTML")

    return with_page(srv.tmp, "chromium-ui", drive)
