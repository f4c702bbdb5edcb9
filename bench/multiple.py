"""MultiPL-E execution throughput per language: our runners (many programs per long-lived
container) against one `docker run --rm` per program (MultiPL-E's own container mode).

For each language, the right body of HumanEval_53_add (tests/multiple_bodies.py) runs N times
  (a) through the language's runner in the Docker sandbox (one container, started before the
      clock starts, as a run's pool starts them while it loads), and
  (b) in one `docker run --rm --network none` of the same image per program, the same harness
      and the same program file bind-mounted;
alternating (a) and (b), so that a machine whose load changes affects both alike. Prints one
line per language: programs/s of each (1 / the median seconds per program) and the ratio.

    .venv/bin/python bench/multiple.py [--n 5] [--langs cpp,py,...]
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from multiple_bodies import ADD, BODIES  # noqa: E402

from codeeval.benchmarks import multiple  # noqa: E402
from codeeval.benchmarks.registry import get_task  # noqa: E402
from codeeval.benchmarks.spec import LoadOptions  # noqa: E402
from codeeval.executors.docker import images  # noqa: E402
from codeeval.executors.docker.sandbox import DockerSandbox  # noqa: E402


def one_docker_run(image: str, program, work: Path) -> bool:
    """The program in a fresh container: the harness as a script, the program file beside it."""
    work.mkdir()
    for name, data in program.files.items():
        (work / name).write_bytes(data)
    (work / "run.py").write_text(program.code)
    (work / "res").touch()
    for path in (work, *work.iterdir()):
        path.chmod(0o777)
    done = subprocess.run(
        ["docker", "run", "--rm", "--network", "none", "--user", "10000:10000", "-v", f"{work}:/w", "-w", "/w",
         "-e", "HOME=/w", "-e", "CODEEVAL_RESULT_FD=5", image, "bash", "-c", "python3 -c 'import sys; exec(open(\"run.py\").read())' 5>res"],
        capture_output=True, timeout=600)
    res = (work / "res").read_text()
    return done.returncode == 0 and bool(res) and all(s["exit_code"] == 0 for s in json.loads(res)["steps"])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=5)
    ap.add_argument("--langs", default=",".join(sorted(BODIES)))
    ap.add_argument("--data-dir", default=str(REPO.parent / "shared" / "data"))
    args = ap.parse_args()
    for lang in args.langs.split(","):
        problem = next(p for p in get_task(f"multiple-{lang}").load(LoadOptions(Path(args.data_dir)))
                       if p.task_id == ADD)
        execution = multiple.MultiplETests(lang)
        program = execution.build(problem, problem.prompt + BODIES[lang][ADD][0])
        image = images.runtime_image(execution.runtime)
        ours, theirs = [], []
        with DockerSandbox(n_workers=1, runtime=execution.runtime) as box, tempfile.TemporaryDirectory() as tmp:
            box.start()
            for i in range(args.n):
                t0 = time.monotonic()
                outcome = box.run([dataclasses.replace(program, key=str(i))])[0]
                ours.append(time.monotonic() - t0)
                assert execution.judge(problem, outcome).passed, outcome.stderr_tail
                t0 = time.monotonic()
                assert one_docker_run(image, program, Path(tmp) / str(i)), f"{lang}: a docker run failed"
                theirs.append(time.monotonic() - t0)
        a, b = statistics.median(ours), statistics.median(theirs)
        print(f"{lang:7s} runner {1 / a:6.2f} programs/s   docker run per program {1 / b:6.2f} programs/s   "
              f"x{b / a:.2f}", flush=True)


if __name__ == "__main__":
    main()
