"""The CLI's subcommands that read, build or serve, each a handler of the parsed arguments:
cli.main dispatches to COMMANDS by name."""
from __future__ import annotations

from typing import Callable

from codeeval.core.errors import UsageError


def _inspect(args) -> int:
    from codeeval.core import storage
    from codeeval.pipeline.failures import run_report

    root = storage.locate(args.run)
    try:
        report, _ = run_report(root)
    except FileNotFoundError as exc:
        raise UsageError(f"no run at {args.run}: {exc}") from None
    print(report, end="")
    return 0


def _compare(args) -> int:
    from codeeval.core import storage
    from codeeval.reporting.compare import report

    print(report(storage.locate(args.run_a), storage.locate(args.run_b)), end="")
    return 0


def _view(args) -> int:
    from pathlib import Path

    from codeeval.core import storage
    from codeeval.reporting.view import serve, site

    roots = [storage.locate(r) for r in (args.run, args.run_b) if r]
    index = site.write(roots, Path(args.out) if args.out else site.default_out(roots))
    print(f"view: {index.resolve()}")
    if args.serve is not None:
        serve.forever(index.parent, args.serve)
    return 0


def _tasks(args) -> int:
    from codeeval.benchmarks.registry import TASKS, get_task, task_names

    for name in task_names():
        spec = get_task(name) if name in TASKS else None
        metrics = ", ".join(m.name for m in spec.metrics) if spec else ""
        print(f"{name:<32} {metrics:<22} {spec.description if spec else ''}")
    return 0


def _leaderboard(args) -> int:
    from codeeval.reporting.leaderboard import load_results, scores, table

    print((scores if args.scores else table)(load_results(args.results)))
    return 0


def _images(args) -> int:
    from codeeval import image_builds

    if args.images_command == "tags":
        for name, tag in image_builds.tags().items():
            print(f"{name:<18} {tag}")
        return 0
    return image_builds.build(args.runtime)


def _team(args) -> int:
    from codeeval import team

    return team.command(args)


def _repo_envs(args) -> int:
    from pathlib import Path

    from codeeval.pipeline.repo_envs import report

    report(args.task, args.data_dir and Path(args.data_dir), args.source_code_root and Path(args.source_code_root),
           args.executor)
    return 0


# Each subcommand's handler, by name (cli_args.py builds their parsers), but the two that start a
# Prefect API, `run` and `nightly`, which cli.py keeps.
COMMANDS: dict[str, Callable[..., int]] = {
    "tasks": _tasks,
    "leaderboard": _leaderboard,
    "inspect": _inspect,
    "view": _view,
    "compare": _compare,
    "images": _images,
    "server": _team,
    "deploy": _team,
    "models": _team,
    "repo-envs": _repo_envs,
}
