"""MultiPL-E's per-language runners behind one signature: program text in, status out.

`Language.program(text)` is the sandbox job (the stdlib harness, harness.py, runs the
language's compile and run commands in the `multiple-<lang>` image), and `Language.result(outcome)`
turns the job's Outcome into a `Result` (MultiPL-E status, exit code, stdout, stderr). The
commands, timeouts and status rules are those of MultiPL-E's `evaluation/src/eval_<lang>.py`,
with the Debian toolchains of codeeval/containers/multiple (differences: docs/multiple.md). Only
status "OK" with exit code 0 passes (bigcode's rule).

Timeouts: each step keeps the reference's seconds, applied by the harness to the step's clock,
its wall time less the time its processes waited for a CPU (cputime.wait_clocked), so that a
step that sleeps or blocks times out as in MultiPL-E and a loaded machine does not time out a
slow compiler. The job's CPU limit is the steps' sum, enforced on the container's whole process
tree (compilers included); the job's clock limit (the sandbox's) is that sum + JOB_SLACK_S, for
the harness's own work between the steps.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Callable, Mapping, Optional

from codeeval.benchmarks.harness_text import harness_text
from codeeval.executors.base import SANDBOX_ERROR, TIMEOUT, Outcome, Program

HARNESS = harness_text("multiple")

OK, SYNTAX, EXCEPTION, ASSERTION, TIMED_OUT = "OK", "SyntaxError", "Exception", "AssertionError", "Timeout"
REFERENCE = "ReferenceError"
JOB_SLACK_S = 5.0  # the job's clock limit over the sum of its steps' (the harness starts and judges them)


@dataclass(frozen=True)
class Step:
    argv: tuple[str, ...]  # `{file}`: the program file; `{stem}`: its name without extension
    timeout_s: float = 15.0  # safe_subprocess's default
    compile: bool = False  # a nonzero exit stops the program and is a SyntaxError


@dataclass(frozen=True)
class Result:
    """What MultiPL-E's eval_<lang>.py returns for one program."""

    status: str  # OK, SyntaxError, Exception, AssertionError, Timeout (or the sandbox's own)
    exit_code: Optional[int]
    stdout: str = ""
    stderr: str = ""

    @property
    def passed(self) -> bool:
        return self.status == OK and self.exit_code == 0


Rule = Callable[[int, str, str], str]  # (exit code, stdout, stderr) of the last step -> status


def exit_zero(code: int, out: str, err: str) -> str:
    return OK if code == 0 else EXCEPTION


def marker(text: str, status: str, where: str = "stderr") -> Rule:
    """OK on exit 0; else `status` when `text` is in the stream, else Exception."""
    def rule(code: int, out: str, err: str) -> str:
        if code == 0:
            return OK
        return status if text in (out if where == "stdout" else err) else EXCEPTION
    return rule


def _node_status(text: str) -> str:
    return (ASSERTION if "ERR_ASSERTION" in text else SYNTAX if "SyntaxError" in text
            else REFERENCE if "ReferenceError" in text else EXCEPTION)


def js_rule(code: int, out: str, err: str) -> str:
    """eval_javascript looks for the markers in `str(CompletedProcess)`: both streams."""
    return OK if code == 0 else _node_status(out + err)


def ts_rule(code: int, out: str, err: str) -> str:
    """eval_ts looks for the same markers in node's stderr only."""
    return OK if code == 0 else _node_status(err)


def elixir_rule(code: int, out: str, err: str) -> str:
    """eval_elixir (nuprl) looks in both streams (ExUnit reports failures on stdout)."""
    if code == 0:
        return OK
    text = out + err
    return ASSERTION if "Assertion with == failed" in text else SYNTAX if "SyntaxError" in text else EXCEPTION


def ml_rule(code: int, out: str, err: str) -> str:
    if code == 0:
        return OK
    return ASSERTION if "Assert_failure" in err else SYNTAX if "Syntax error" in err else EXCEPTION


def r_rule(code: int, out: str, err: str) -> str:
    """eval_r: `unexpected` anywhere is a SyntaxError; a failure with an empty stderr an AssertionError."""
    if code == 0:
        return OK
    return SYNTAX if "unexpected" in out + err else ASSERTION if not err else EXCEPTION


def cs_rule(code: int, out: str, err: str) -> str:
    """Mono's Debug.Assert prints and goes on (exit 0): stderr decides, not the exit code."""
    return EXCEPTION if "DefaultTraceListener.Fail" in err or "Unhandled Exception" in err else OK


def d_rule(code: int, out: str, err: str) -> str:
    return OK if code == 0 else SYNTAX if "Error:" in err else EXCEPTION


def go_rule(code: int, out: str, err: str) -> str:
    if "[setup failed]" in out or "[build failed]" in out:
        return SYNTAX
    return EXCEPTION if "FAIL" in out else OK


def php_rule(code: int, out: str, err: str) -> str:
    return SYNTAX if "PHP Parse error" in out else EXCEPTION if code != 0 else OK


def pl_rule(code: int, out: str, err: str) -> str:
    return OK if code == 0 and "ERROR" not in out and "ERROR" not in err else EXCEPTION


def quiet_rule(syntax: str = "") -> Rule:
    """Racket (rackunit reports failures on stderr and exits 0) and Scala: exit 0 *and* empty stderr."""
    def rule(code: int, out: str, err: str) -> str:
        if code == 0 and not err:
            return OK
        return SYNTAX if syntax and syntax in err else EXCEPTION
    return rule


def rb_rule(code: int, out: str, err: str) -> str:
    """eval_ruby: a failure with an empty stderr is an Exception, with anything on stderr a SyntaxError."""
    return OK if code == 0 else EXCEPTION if not err else SYNTAX


@dataclass(frozen=True)
class Language:
    name: str
    file: str
    steps: tuple[Step, ...]
    rule: Rule = exit_zero
    env: Mapping[str, str] = field(default_factory=dict)  # `{work}`: the working directory
    dirs: tuple[str, ...] = ()  # made before the first step

    @property
    def timeout_s(self) -> float:
        return sum(s.timeout_s for s in self.steps)

    def spec(self) -> dict:
        return {"file": self.file, "env": dict(self.env), "dirs": list(self.dirs),
                "steps": [{"argv": list(s.argv), "limit_s": s.timeout_s, "compile": s.compile}
                          for s in self.steps]}

    def program(self, text: str, key: str = "") -> Program:
        """The sandbox job that compiles and runs `text` (for the `multiple-<name>` image)."""
        code = HARNESS + f"\nmain(json.loads({json.dumps(json.dumps(self.spec()))}))\n"
        return Program(key, code, timeout_s=self.timeout_s, guard=False, clock_s=self.timeout_s + JOB_SLACK_S,
                       files={self.file: text.encode("utf-8")})

    def result(self, outcome: Outcome) -> Result:
        """MultiPL-E's status of the job. The sandbox's own timeouts and errors come first."""
        if outcome.status == TIMEOUT:
            return Result(TIMED_OUT, None, outcome.stdout_tail, outcome.stderr_tail)
        if outcome.status == SANDBOX_ERROR or not outcome.result:
            status = SANDBOX_ERROR if outcome.status == SANDBOX_ERROR else "HarnessError"
            return Result(status, outcome.exit_code, outcome.stdout_tail, outcome.stderr_tail or outcome.detail)
        steps = json.loads(outcome.result)["steps"]
        last, compiled = steps[-1], all(s["exit_code"] == 0 for s in steps[:-1])
        out, err, code = last["stdout"], last["stderr"], last["exit_code"]
        if last["timed_out"]:
            return Result(TIMED_OUT, None, out, err)
        if not compiled or (len(steps) < len(self.steps)):
            return Result(SYNTAX, code, out, err)
        return Result(self.rule(code, out, err), code, out, err)


def _one(name: str, argv: tuple[str, ...], timeout_s: float = 15.0, **kw) -> Language:
    return Language(name, f"Problem.{name}", (Step(argv, timeout_s),), **kw)


def _compiled(name: str, compile_argv, run_argv, compile_s=15.0, run_s=15.0, ext=None, **kw) -> Language:
    return Language(name, f"Problem.{ext or name}",
                    (Step(tuple(compile_argv), compile_s, compile=True), Step(tuple(run_argv), run_s)), **kw)


LANGUAGES: dict[str, Language] = {lang.name: lang for lang in (
    _compiled("cpp", ("g++", "{file}", "-o", "{stem}", "-std=c++17"), ("./{stem}",)),
    _compiled("cs", ("mcs", "-d:DEBUG", "-r:System.Numerics.dll", "{file}", "-out:{stem}.exe"),
              ("mono", "{stem}.exe"), run_s=5.0, rule=cs_rule, env={"MONO_TRACE_LISTENER": "Console.Error"}),
    # rdmd (dmd) is not in Debian: ldc's ldmd2 compiles, then the program runs (a failing unittest is
    # then an Exception; rdmd's one-step run labels it by "Error:" in stderr).
    _compiled("d", ("ldmd2", "-unittest", "-main", "-of={stem}", "{file}"), ("./{stem}",), rule=d_rule),
    Language("elixir", "Problem.exs", (Step(("elixir", "{file}"), 5.0),),
             rule=elixir_rule),
    Language("go", "problem_test.go", (Step(("go", "test", "{file}"), 30.0),), rule=go_rule,
             env={"GOCACHE": "{work}/.gocache", "GOPATH": "{work}/.gopath", "GO111MODULE": "off"}),
    _one("hs", ("runghc", "{file}")),
    _compiled("java", ("javac", "-encoding", "UTF8", "-d", "classes", "{file}"),
              ("java", "-ea", "-cp", "classes:/usr/multiple/javatuples-1.2.jar", "Problem"), dirs=("classes",),
              env={"CLASSPATH": "/usr/multiple/javatuples-1.2.jar"}),
    _one("js", ("node", "{file}"), 5.0, rule=js_rule),
    _one("lua", ("lua5.3", "{file}")),
    _one("ml", ("ocaml", "{file}"), rule=ml_rule),
    _one("php", ("php", "{file}"), rule=php_rule),
    _one("pl", ("perl", "{file}"), rule=pl_rule),
    _one("py", ("python3", "{file}"), rule=marker("SyntaxError", SYNTAX)),
    _one("r", ("Rscript", "{file}"), 5.0, rule=r_rule),
    _one("rb", ("ruby", "{file}"), 5.0, rule=rb_rule),
    _one("rkt", ("racket", "{file}"), rule=quiet_rule("read-syntax")),
    _compiled("rs", ("rustc", "{file}", "-o", "{stem}"), ("./{stem}",), run_s=5.0),
    _compiled("scala", ("scalac", "-d", "classes", "{file}"), ("scala", "-cp", "classes", "Problem"),
              compile_s=45.0, rule=quiet_rule(), dirs=("classes",)),
    _one("sh", ("bash", "{file}"), rule=marker("syntax error", SYNTAX)),
    _compiled("swift", ("swiftc", "{file}", "-o", "{stem}"), ("./{stem}",), compile_s=45.0, run_s=5.0),
    _compiled("ts", ("tsc", "--target", "esnext", "{file}"), ("node", "{stem}.js"), rule=ts_rule),
)}

# Languages with prompts but no toolchain (codeeval/executors/docker/images.py raises for their runtime).
UNAVAILABLE = {"jl": "Julia"}


def language(name: str) -> Language:
    if name in UNAVAILABLE:
        from codeeval.executors.docker.images import runtime_image

        runtime_image(f"multiple-{name}")  # raises with the reason
    try:
        return LANGUAGES[name]
    except KeyError:
        raise KeyError(f"no MultiPL-E runner for language {name!r}; known: {', '.join(sorted(LANGUAGES))}") from None
