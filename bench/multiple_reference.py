"""MultiPL-E's own evaluator against ours: the same programs, both verdicts, one table.

MultiPL-E's evaluator (`containerized_eval.py`, `eval_<lang>.py`, `safe_subprocess/`) is
Python; its image cannot be pulled here, so this copies the upstream files (never vendored:
read from the git mirrors or folders named on the command line) into a scratch folder, mounts it
in OUR `multiple-<lang>` images and runs `eval_string_script(lang, program)` there, 2 programs
at a time. The commands Debian lacks are thin shims on PATH: `csc` -> Mono's `mcs` (same
options, `/x:` spelled `-x:`), `rdmd` -> `ldmd2` (compile, then run the binary: what rdmd does).
The same programs then go through our runners (the Docker sandbox, codeeval/benchmarks/multiple).

Programs, per language (HumanEval reworded prompts): the right and wrong bodies of
tests/multiple_bodies.py (2 problems), and adversarial bodies of HumanEval_53_add: an endless
loop, an exception, a compile/syntax error, a right answer with noise on stderr, exit code 3,
and a few language-specific ones. A pair agrees when the MultiPL-E status is the same and the
exit code too (except for timeouts: upstream reports -1 or None, ours None).

    .venv/bin/python bench/multiple_reference.py \\
        --upstream /work/.mirror/bigcode-project+bigcode-evaluation-harness/repo:bigcode_eval/tasks/custom_metrics/multiple_metrics \\
        --upstream /path/to/nuprl-evaluation-src   # eval_elixir.py, eval_hs.py, eval_ocaml.py (absent from bigcode's copy)
        [--langs cpp,py] [--json out.json]

An --upstream is `GITDIR:SUBPATH` (files at HEAD) or a folder; a later one adds only files the
earlier ones lack. `--reuse` / `--ours-reuse` take either side's verdicts from an earlier --json
(by language and case), `--table A.json B.json` prints the table of merged files. Upstream
limits are wall-clock: run it on a quiet machine, or slow compilers (tsc, scalac) time out.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from multiple_bodies import ADD, BODIES  # noqa: E402

from codeeval.benchmarks.multiple.languages import LANGUAGES  # noqa: E402
from codeeval.benchmarks.registry import get_task  # noqa: E402
from codeeval.benchmarks.spec import LoadOptions  # noqa: E402
from codeeval.executors.base import Limits  # noqa: E402
from codeeval.executors.docker import images  # noqa: E402
from codeeval.executors.docker.sandbox import DockerSandbox  # noqa: E402

SYNTAX = "\n  )))) @@@ (((( ;;\n"  # a parse error in every language
# Adversarial bodies of HumanEval_53_add (x, y) appended to the stripped prompt.
ADVERSARIAL = {
    "cpp": {"loop": "\n    volatile long i = 0;\n    while (true) { i++; }\n    return 0;\n",
            "raise": "\n    throw std::runtime_error(\"no\");\n",
            "stderr": "\n    std::cerr << \"noise\" << std::endl;\n    return x + y;\n", "exit3": "\n    exit(3);\n"},
    "cs": {"loop": "\n    public static long Add(long x, long y) {\n        while (true) {}\n",
           "raise": "\n    public static long Add(long x, long y) {\n        throw new Exception(\"no\");\n",
           "stderr": "\n    public static long Add(long x, long y) {\n        Console.Error.WriteLine(\"noise\");\n"
                     "        return x + y;\n",
           "exit3": "\n    public static long Add(long x, long y) {\n        Environment.Exit(3);\n        return 0;\n"},
    "d": {"loop": "\n{\n    long i = 0;\n    while (x + i >= x) { i = i ^ 0; }\n    return i;\n}\n",
          "raise": "\n{\n    throw new Exception(\"no\");\n}\n",
          "stderr": "\n{\n    import std.stdio : stderr;\n    stderr.writeln(\"noise\");\n    return x + y;\n}\n",
          "exit3": "\n{\n    import core.stdc.stdlib : exit;\n    exit(3);\n    return 0;\n}\n"},
    "elixir": {"loop": "\n    loop(x, y)\n  end\n  def loop(x, y), do: loop(x, y)\nend\n",
               "raise": "\n    raise \"no\"\n  end\nend\n",
               "stderr": "\n    IO.puts(:stderr, \"noise\")\n    x + y\n  end\nend\n",
               "exit3": "\n    System.halt(3)\n  end\nend\n"},
    "go": {"loop": "\n    for {\n    }\n}\n", "raise": "\n    panic(\"no\")\n}\n",
           "stderr": "\n    println(\"noise\")\n    return x + y\n}\n"},
    "hs": {"loop": " length [1..] + x\n", "raise": " error \"no\"\n"},
    "java": {"loop": "\n        while (true) {}\n", "raise": "\n        throw new RuntimeException(\"no\");\n",
             "stderr": "\n        System.err.println(\"noise\");\n        return x + y;\n",
             "exit3": "\n        System.exit(3);\n        return 0;\n"},
    "js": {"loop": "\n  while (true) {}\n}\n", "raise": "\n  throw new Error(\"no\");\n}\n",
           "stderr": "\n  console.error(\"noise\");\n  return x + y;\n}\n", "exit3": "\n  process.exit(3);\n}\n",
           "reference": "\n  return undefinedName + x;\n}\n"},
    "lua": {"loop": "\n    while true do end\nend\n", "raise": "\n    error(\"no\")\nend\n",
            "stderr": "\n    io.stderr:write(\"noise\\n\")\n    return x + y\nend\n", "exit3": "\n    os.exit(3)\nend\n"},
    "ml": {"loop": "\n  let rec f n = f n in f x\n", "raise": "\n  failwith \"no\"\n",
           "stderr": "\n  prerr_endline \"noise\"; x + y\n", "exit3": "\n  exit 3\n"},
    "php": {"loop": "\n    while (true) {}\n}\n", "raise": "\n    throw new Exception(\"no\");\n}\n",
            "stderr": "\n    fwrite(STDERR, \"noise\\n\");\n    return $x + $y;\n}\n", "exit3": "\n    exit(3);\n}\n"},
    "pl": {"loop": "\n    while (1) {}\n}\n", "raise": "\n    die \"no\";\n}\n",
           "stderr": "\n    print STDERR \"noise\\n\";\n    return $x + $y;\n}\n", "exit3": "\n    exit 3;\n}\n",
           "ERROR-on-stdout": "\n    print \"ERROR\\n\";\n    return $x + $y;\n}\n"},
    "py": {"loop": "\n    while True:\n        pass\n", "raise": "\n    raise ValueError('no')\n",
           "stderr": "\n    import sys\n    print('noise', file=sys.stderr)\n    return x + y\n",
           "exit3": "\n    import sys\n    sys.exit(3)\n"},
    "r": {"loop": "\n  repeat {}\n}\n", "raise": "\n  stop(\"no\")\n}\n",
          "stderr": "\n  message(\"noise\")\n  return(x + y)\n}\n", "exit3": "\n  quit(status = 3)\n}\n"},
    "rb": {"loop": "\n  loop {}\nend\n", "raise": "\n  raise \"no\"\nend\n",
           "stderr": "\n  $stderr.puts \"noise\"\n  x + y\nend\n", "exit3": "\n  exit!(3)\nend\n"},
    "rkt": {"loop": "\n  (let loop () (loop)))\n", "raise": "\n  (error \"no\"))\n",
            "stderr": "\n  (eprintf \"noise\") (+ x y))\n", "exit3": "\n  (exit 3))\n"},
    "rs": {"loop": "\n    loop {}\n", "raise": "\n    panic!(\"no\")\n",
           "stderr": "\n    eprintln!(\"noise\");\n    x + y\n", "exit3": "\n    std::process::exit(3)\n"},
    "scala": {"loop": "\n        while (true) {}\n        0L\n", "raise": "\n        throw new RuntimeException(\"no\")\n",
              "stderr": "\n        System.err.println(\"noise\")\n        x + y\n", "exit3": "\n        sys.exit(3)\n"},
    "sh": {"loop": "\n    while true; do :; done\n", "stderr": "\n    echo noise >&2\n    echo $(( $1 + $2 ))\n",
           "exit3": "\n    exit 3\n"},
    "swift": {"loop": "\n    while true {}\n", "raise": "\n    fatalError(\"no\")\n"},
    "ts": {"loop": "\n  while (true) {}\n}\n", "raise": "\n  throw new Error(\"no\");\n}\n",
           "stderr": "\n  console.error(\"noise\");\n  return x + y;\n}\n",
           "exit3": "\n  require('process').exit(3);\n  return 0;\n}\n"},
}
# Java's Pair comes from javatuples: upstream puts the jar on CLASSPATH, then runs `java -cp <classes>`.
JAVA_PAIR = ("HumanEval_155_even_odd_count",
             "\n        long e = 0, o = 0;\n        for (char c : String.valueOf(Math.abs(num)).toCharArray()) {\n"
             "            if ((c - '0') % 2 == 0) { e++; } else { o++; }\n        }\n"
             "        return Pair.with(e, o);\n")

SHIMS = {
    "csc": """#!/usr/bin/python3
# Roslyn's csc is not in Debian: Mono's mcs takes the same options spelled -x: instead of /x:.
import os, sys
args = ["-" + a[1:] if a.startswith("/") and ":" in a[:6] else a for a in sys.argv[1:]]
os.execvp("mcs", ["mcs", *args])
""",
    "rdmd": """#!/usr/bin/python3
# dmd's rdmd is not in Debian: compile with ldc's ldmd2, then run the binary (what rdmd does).
import os, subprocess, sys, tempfile
flags = [a for a in sys.argv[1:] if a.startswith("-")]
files = [a for a in sys.argv[1:] if not a.startswith("-")]
out = tempfile.mkdtemp() + "/prog"
built = subprocess.run(["ldmd2", *flags, "-of=" + out, files[0]])
if built.returncode:
    sys.exit(built.returncode)
os.execv(out, [out, *files[1:]])
""",
}

DRIVER = """
import json, os, sys, time
from concurrent.futures import ThreadPoolExecutor
sys.path[:0] = ["/up", "/up/mpe"]  # the package (bigcode's relative imports) and its folder (nuprl's absolute ones)
from mpe import containerized_eval as ce
for lang, mod, ext in (("elixir", "eval_elixir", ".exs"), ("hs", "eval_hs", ".hs"), ("ml", "eval_ocaml", ".ml")):
    if lang not in ce.EVALUATORS and os.path.exists(f"/up/mpe/{mod}.py"):
        ce.EVALUATORS[lang] = (__import__(mod).eval_script, ext)  # nuprl's mapping
jobs = json.load(open(sys.argv[1]))
def one(job):
    started = time.monotonic()
    try:
        r = ce.eval_string_script(job["lang"], job["program"])
    except Exception as exc:
        r = {"status": ("EvaluatorError " + repr(exc))[:200], "exit_code": None, "stderr": ""}
    return {"status": r["status"], "exit_code": r["exit_code"], "stderr": (r["stderr"] or "")[:400],
            "seconds": round(time.monotonic() - started, 2)}
with ThreadPoolExecutor(int(sys.argv[3])) as pool:
    results = list(pool.map(one, jobs))
json.dump(results, open(sys.argv[2], "w"))
"""


def copy_upstream(sources: list[str], dest: Path) -> list[str]:
    """The evaluator's .py files (and safe_subprocess/) from each source; earlier sources win."""
    got = []
    for source in sources:
        gitdir, _, sub = source.partition(":")
        if sub:
            names = subprocess.run(["git", "-C", gitdir, "ls-tree", "-r", "--name-only", "HEAD", sub + "/"],
                                   capture_output=True, text=True, check=True).stdout.split()
            read = lambda n: subprocess.run(["git", "-C", gitdir, "show", f"HEAD:{n}"],  # noqa: E731
                                            capture_output=True, check=True).stdout
            files = {n[len(sub) + 1:]: n for n in names}
        else:
            root = Path(source)
            files = {str(p.relative_to(root)): p for p in root.rglob("*.py")}
            read = lambda p: Path(p).read_bytes()  # noqa: E731
        for rel, where in sorted(files.items()):
            if not rel.endswith(".py") or rel.count("/") > 1 or (dest / rel).exists():
                continue
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            (dest / rel).write_bytes(read(where))
            got.append(rel)
    (dest / "__init__.py").touch()
    return got


def programs(data_dir: Path, langs: list[str]) -> list[dict]:
    jobs = []
    for lang in langs:
        problems = {p.task_id: p for p in get_task(f"multiple-{lang}").load(LoadOptions(data_dir))}
        cases = [(f"{name.split('_')[2]} right", name, right) for name, (right, _) in BODIES[lang].items()]
        cases += [(f"{name.split('_')[2]} wrong", name, wrong) for name, (_, wrong) in BODIES[lang].items()]
        cases += [(case, ADD, body) for case, body in ADVERSARIAL.get(lang, {}).items()]
        cases.append(("syntax", ADD, SYNTAX))
        if lang == "java":
            cases.append(("javatuples Pair right", *JAVA_PAIR))
        for case, name, body in cases:
            p = problems[name]
            jobs.append({"lang": lang, "case": case, "problem": p, "program": p.prompt + body + "\n" + p.record["tests"],
                         "upstream_lang": p.record["language"]})  # what bigcode passes (Go: `go_test.go`)
    return jobs


def run_upstream(jobs: list[dict], upstream: list[str], workers: int) -> list[dict]:
    results: list = [None] * len(jobs)
    with tempfile.TemporaryDirectory(prefix="mpe-upstream-") as scratch:
        up = Path(scratch)
        copied = copy_upstream(upstream, up / "mpe")
        print(f"upstream files: {', '.join(copied)}", file=sys.stderr)
        (up / "shims").mkdir()
        for name, text in SHIMS.items():
            (up / "shims" / name).write_text(text)
            (up / "shims" / name).chmod(0o755)
        (up / "driver.py").write_text(DRIVER)
        os.chmod(up, 0o777)
        for suite in ("bookworm", "trixie"):
            idx = [i for i, j in enumerate(jobs) if (j["lang"] == "swift") == (suite == "trixie")]
            if not idx:
                continue
            (up / f"{suite}.json").write_text(json.dumps([{"lang": jobs[i]["upstream_lang"], "program": jobs[i]["program"]}
                                                         for i in idx]))
            image = images.runtime_image("multiple-swift" if suite == "trixie" else "multiple-cpp")
            path = "/up/shims:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
            subprocess.run(["docker", "run", "--rm", "--network", "none", "--user", f"{os.getuid()}:{os.getgid()}",
                            "--memory", "4g", "-e", "HOME=/tmp", "-e", f"PATH={path}", "-v", f"{up}:/up",
                            image, "python3", "/up/driver.py", f"/up/{suite}.json", f"/up/{suite}.out.json",
                            str(workers)], check=True)
            for i, r in zip(idx, json.loads((up / f"{suite}.out.json").read_text())):
                results[i] = r
    return results


def run_ours(jobs: list[dict], workers: int) -> list[dict]:
    results: list = [None] * len(jobs)
    for runtime, swift in (("multiple-cpp", False), ("multiple-swift", True)):
        idx = [i for i, j in enumerate(jobs) if (j["lang"] == "swift") == swift]
        if not idx:
            continue
        # nominal CPU limits (no stretching on a slow machine): the endless loops cost their limit, no more
        with DockerSandbox(n_workers=workers, runtime=runtime, limits=Limits(speed_reference_s=1e9)) as box:
            progs = [dataclasses.replace(LANGUAGES[jobs[i]["lang"]].program(jobs[i]["program"]), key=str(i))
                     for i in idx]
            for i, outcome in zip(idx, box.run(progs)):
                r = LANGUAGES[jobs[i]["lang"]].result(outcome)
                results[i] = {"status": r.status, "exit_code": r.exit_code, "stderr": r.stderr[:400]}
    return results


def agree(a: dict, b: dict) -> bool:
    if a["status"] != b["status"]:
        return False
    return a["status"] == "Timeout" or a["exit_code"] == b["exit_code"]


def passed(r: dict) -> bool:
    return r["status"] == "OK" and r["exit_code"] == 0  # bigcode's rule


def table(jobs, theirs, ours) -> str:
    lines = ["| language | programs | same status and exit code | same pass/fail | disagreements (case: MultiPL-E vs ours) |",
             "|---|---|---|---|---|"]
    for lang in dict.fromkeys(j["lang"] for j in jobs):
        idx = [i for i, j in enumerate(jobs) if j["lang"] == lang]
        same = sum(agree(theirs[i], ours[i]) for i in idx)
        verdict = sum(passed(theirs[i]) == passed(ours[i]) for i in idx)
        diffs = "; ".join(f"{jobs[i]['case']}: {theirs[i]['status']}/{theirs[i]['exit_code']} vs "
                          f"{ours[i]['status']}/{ours[i]['exit_code']}" for i in idx if not agree(theirs[i], ours[i]))
        lines.append(f"| {lang} | {len(idx)} | {same} | {verdict} | {diffs or '-'} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--upstream", action="append", default=[], help="GITDIR:SUBPATH or a folder (repeatable)")
    ap.add_argument("--reuse", type=Path, help="take MultiPL-E's verdicts from an earlier --json (same cases)")
    ap.add_argument("--data-dir", type=Path, default=REPO.parent / "shared" / "data")
    ap.add_argument("--langs", default=",".join(sorted(LANGUAGES)))
    ap.add_argument("--ours-reuse", type=Path, help="take our verdicts from an earlier --json where it has them")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--json", type=Path, help="write every program's two verdicts here")
    ap.add_argument("--table", type=Path, nargs="+", help="only print the table of earlier --json files "
                    "(a later file's cases replace an earlier one's)")
    args = ap.parse_args(argv)
    if args.table:
        merged = {}
        for path in args.table:
            merged.update({(r["lang"], r["case"]): r for r in json.loads(path.read_text()) if "ours" in r})
        rows = list(merged.values())
        print(table(rows, [r["multipl_e"] for r in rows], [r["ours"] for r in rows]))
        return 0
    if not args.data_dir.is_dir():
        args.data_dir = Path("/work/shared/data")
    jobs = programs(args.data_dir, args.langs.split(","))
    started = time.monotonic()
    if args.reuse:
        earlier = {(r["lang"], r["case"]): r["multipl_e"] for r in json.loads(args.reuse.read_text())}
        missing = [(j["lang"], j["case"]) for j in jobs if (j["lang"], j["case"]) not in earlier]
        if missing:
            ap.error(f"--reuse: no verdicts for {missing[:5]}")
        theirs = [earlier[(j["lang"], j["case"])] for j in jobs]
    elif args.upstream:
        theirs = run_upstream(jobs, args.upstream, args.workers)
    else:
        ap.error("give --upstream (or --reuse)")
    middle = time.monotonic()
    if args.json and not args.reuse:  # kept should ours fail
        args.json.write_text(json.dumps([{"lang": j["lang"], "case": j["case"], "multipl_e": t}
                                         for j, t in zip(jobs, theirs)], indent=1))
    if args.ours_reuse:
        earlier = {(r["lang"], r["case"]): r["ours"] for r in json.loads(args.ours_reuse.read_text()) if "ours" in r}
        ours = [earlier.get((j["lang"], j["case"])) for j in jobs]
        todo = [i for i, r in enumerate(ours) if r is None]
        for i, r in zip(todo, run_ours([jobs[i] for i in todo], args.workers) if todo else []):
            ours[i] = r
    else:
        ours = run_ours(jobs, args.workers)
    print(f"{len(jobs)} programs; MultiPL-E's evaluator {middle - started:.0f} s, ours {time.monotonic() - middle:.0f} s "
          f"({args.workers} at a time)", file=sys.stderr)
    print(table(jobs, theirs, ours))
    if args.json:
        args.json.write_text(json.dumps([{"lang": j["lang"], "case": j["case"], "multipl_e": t, "ours": o}
                                         for j, t, o in zip(jobs, theirs, ours)], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
