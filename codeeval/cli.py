"""`codeeval` command line: bigcode-evaluation-harness's flags mapped onto the flow.

Bad input exits with code 2 and one line on stderr, before any flow runs. A `run` or `nightly`
command starts its private Prefect API server first of all, before this module imports the
rest of the CLI (the server's boot is the long pole of a command: docs/architecture.md); bad
input stops it again.
"""
from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from typing import Callable, Optional, Sequence

from codeeval.core import memory
from codeeval.core.errors import RunFailed, UsageError, no_space

SERVED = ("run", "nightly")  # the commands that run a flow, on a private API unless one is configured


def prefect_environment() -> None:
    """Defaults that make Prefect work offline on small machines (set before it is imported)."""
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("DO_NOT_TRACK", "1")


def early_server(argv: Sequence[str]):
    """The private API server of a command in SERVED, started before anything else (None for any
    other command, a configured API, or a rank under a launcher: `run` decides there)."""
    if not argv or argv[0] not in SERVED or {"-h", "--help"} & set(argv) or int(os.environ.get("WORLD_SIZE", "1")) > 1:
        return None
    from codeeval import prefect_api

    prefect_environment()
    return prefect_api.private_server()


def run(config, phases: Phases, started=None) -> Optional[dict]:
    """Pre-flight, then the flow. A private Prefect API server boots meanwhile (`started`, unless
    one is configured) and dies with this process, however it ends (codeeval/prefect_api.py)."""
    from codeeval.generation.hf.devices import launcher_rank

    rank, world, _ = launcher_rank()
    if world > 1 and rank != 0:  # under `accelerate launch`: rank 0's flow uses every visible device
        print(f"codeeval: rank {rank}/{world}: generation is sharded over every GPU by rank 0's flow",
              file=sys.stderr)
        return None
    from codeeval import prefect_api

    prefect_environment()
    from codeeval.core import hub
    from codeeval.core.fingerprint import code_version

    with prefect_api.api_for_run(started) as server, hub.offline_for_this_run():
        from codeeval.executors.pool import POOL

        try:
            with memory.gc_paused():  # the imports and checks make no cyclic garbage (core/memory.py)
                plans = _prepare(config, phases)
            with prefect_api.run_settings(server):  # set while the server boots
                with memory.gc_paused():
                    if server is not None:
                        prefect_api.warm_up()  # what the flow imports, meanwhile too
                        code_version()  # and the hash of codeeval's sources (once a process) its shard keys need
                    if any(plan.spec.executes for plan in plans.plans.values()) and not config.generation_only:
                        from codeeval.pipeline.plan import sandbox_spec

                        # the containers start on the core this process leaves idle while it waits
                        # (started earlier, they slowed the server's boot: docs/architecture.md)
                        POOL.prestart(sandbox_spec(config))
                    if server is not None:
                        _wait_ready(server)
                phases.mark("prefect start")
                from codeeval.flows.evaluate import evaluate

                try:
                    results = evaluate(config, plans)
                except OSError as exc:  # problems.parquet, run.json or results.json did not fit
                    if not no_space(exc):
                        raise
                    from codeeval.reporting.summary import no_space_message

                    raise RunFailed(no_space_message(str(config.run_dir.resolve()))) from None
            phases.mark("flow")
            return results
        finally:
            POOL.close()


def _prepare(config, phases: Phases):
    """Flags, outputs, model, sandbox and data checked, the flow module imported: the plans."""
    from codeeval.core import hub
    from codeeval.generation import LOADS_WEIGHTS
    from codeeval.pipeline.plan import RunPlans, check, plan_run
    from codeeval.preflight import check_model, check_outputs, check_sandbox

    phases.mark("imports")
    check(config)
    check_outputs(config)
    if config.backend_kind in LOADS_WEIGHTS or not config.data_dir:
        hub.go_offline_if_unreachable()  # before huggingface_hub loads: no retries offline
    check_model(config)
    check_sandbox(config)
    phases.mark("checks")
    plans = RunPlans.of(config, plan_run(config))  # loads data, validates k, generations; handed to the flow
    phases.mark("data")
    import codeeval.flows.evaluate  # noqa: F401 - Prefect and the flow, while the server boots

    phases.mark("prefect import")
    return plans


def _wait_ready(server) -> None:
    """The private API server is up, or the run fails with the server's one-line reason."""
    try:
        server.wait_ready()
    except RuntimeError as exc:
        raise RunFailed(str(exc)) from None


def nightly(models_file: str, output_dir: Optional[str], runs_dir: Optional[str], started=None) -> int:
    """The nightly flow on a private API (`started`, unless one is configured), as `run` does;
    the models file is checked while it boots."""
    from pathlib import Path

    from codeeval import prefect_api
    from codeeval.reporting import nightly as library

    prefect_environment()
    from codeeval.pipeline.plan import check

    for config in library.load_models(Path(models_file), Path(runs_dir) if runs_dir else None):
        check(config)  # a bad file or task fails in a second, before any flow runs
    with prefect_api.api_for_run(started) as server:
        from codeeval.flows.nightly import nightly_leaderboard

        if server is not None:
            _wait_ready(server)
        with prefect_api.run_settings(server):
            result = nightly_leaderboard(models_file, output_dir=output_dir, runs_dir=runs_dir)
    print(f"leaderboard: {result['rows']} rows, {len(result['changes'])} changes since the previous night; "
          f"{result['html']}")
    return 0


class Interrupted(KeyboardInterrupt):
    """SIGTERM (or SIGINT) arrived: the main thread stops what it waits for, like Ctrl-C."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


STOP_GRACE_S = 8.0  # from the signal to the exit, whatever the clean-up is waiting for


def _on_signal(signum, frame) -> None:
    """Unwind the main thread (the grace watchdog is armed by _watch_stop_signals)."""
    raise Interrupted(signum)


def _watch_stop_signals() -> Callable[[], None]:
    """Exit STOP_GRACE_S after the first SIGTERM or SIGINT, whatever the main thread is doing;
    returns the function that stops watching. While a flow runs Prefect swaps in a SIGTERM
    handler of its own that unwinds through its task runner, which waits for every shard thread:
    one stuck thread (seen: a progress bar's lock never released) kept a SIGTERMed run alive for
    minutes. The interpreter writes every signal's number to the wakeup fd, whichever Python
    handler is installed, so this thread sees it regardless."""
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    previous = signal.set_wakeup_fd(write_end, warn_on_full_buffer=False)

    def listen() -> None:
        with open(read_end, "rb", buffering=0) as signals:
            while byte := signals.read(1):
                if byte[0] in (signal.SIGTERM, signal.SIGINT):
                    time.sleep(STOP_GRACE_S)
                    os._exit(128 + byte[0])

    threading.Thread(target=listen, name="codeeval-stop-watchdog", daemon=True).start()

    def stop() -> None:
        signal.set_wakeup_fd(previous)
        os.close(write_end)  # the listener reads the end of the pipe and leaves

    return stop


def _stop_now(code: int) -> None:
    """Flush and leave now, waiting for nothing (after an interrupt: not for shard threads still
    generating or executing; their containers exit with the docker clients' stdin, the
    temporary server by its parent-death signal, and finished shards are on disk)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


class Phases:
    """Wall-clock marks of one command, printed on stderr as JSON when CODEEVAL_PHASES=1
    (bench/overhead.py reads them)."""

    def __init__(self) -> None:
        self.marks: list[tuple[str, float]] = [("start", time.time())]

    def mark(self, name: str) -> None:
        self.marks.append((name, time.time()))

    def report(self) -> None:
        if os.environ.get("CODEEVAL_PHASES") == "1":
            print("codeeval: phases " + json.dumps(self.marks), file=sys.stderr)


def main(argv: Optional[Sequence[str]] = None) -> int:
    memory.limit_malloc_arenas()  # before any thread starts (codeeval/core/memory.py)
    phases = Phases()
    argv = list(sys.argv[1:] if argv is None else argv)
    main_thread = threading.current_thread() is threading.main_thread()  # the parent-death signal's thread
    server = early_server(argv) if main_thread else None
    try:
        return _main(argv, phases, main_thread, server)
    finally:
        if server is not None:  # a run has stopped it already; bad input has not
            server.stop()


def _main(argv: list[str], phases: Phases, main_thread: bool, server) -> int:
    from codeeval.cli_args import build_parser, config_from_args  # while the server boots
    from codeeval.cli_commands import COMMANDS

    args = build_parser().parse_args(argv)
    handlers, stop_watching = {}, lambda: None
    if main_thread:
        handlers = {signum: signal.signal(signum, _on_signal) for signum in (signal.SIGTERM, signal.SIGINT)}
        stop_watching = _watch_stop_signals()
    try:
        if args.command == "nightly":
            return nightly(args.models_file, args.output_dir, args.runs_dir, server)
        command = COMMANDS.get(args.command)
        if command is not None:  # every other subcommand but `run`, which prints its results below
            return command(args)
        results = run(config_from_args(args), phases, server)
    except UsageError as exc:
        print(f"codeeval: error: {exc}", file=sys.stderr)
        return 2
    except RunFailed as exc:
        print(f"codeeval: run failed: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt as exc:
        signum = getattr(exc, "signum", signal.SIGINT)
        print(f"codeeval: interrupted ({signal.Signals(signum).name}); finished shards are kept and reused "
              "by the next run", file=sys.stderr)
        _stop_now(128 + signum)
    finally:
        stop_watching()
        for signum, handler in handlers.items():
            signal.signal(signum, handler)
    if results is not None:
        from codeeval.reporting.summary import results_table

        print(results_table(results))
    phases.report()
    return 0


def entry() -> None:
    """The console script: main(), then leave at once. Every resource of the run is closed and
    Prefect's queues are drained by then; the interpreter's own teardown (module GC, Prefect's
    exit hooks) would add half a second to every command."""
    try:
        code = main()
    except BrokenPipeError:  # `codeeval tasks | head`: the reader left, nothing to report
        code = 0
    _stop_now(code)


if __name__ == "__main__":
    entry()
