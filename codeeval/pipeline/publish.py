"""The publish stage: run.json, results.json in bigcode's shape, and bigcode-style exports."""
from __future__ import annotations

import dataclasses
import json
import os
from collections import defaultdict
from typing import Mapping, Optional, Sequence

from codeeval import __version__
from codeeval.core import artifacts, provenance
from codeeval.core.contracts import PlannedTask, Reuse, ShardId, TaskScore
from codeeval.core.results import RunResults, TaskSummary
from codeeval.pipeline.config import RunConfig
from codeeval.pipeline.problems import read_problems
from codeeval.pipeline.usage import task_compute, task_thinking, task_usage


def recorded_config(config: RunConfig) -> dict:
    """The config as written to disk: secrets (an API key passed as a flag) masked."""
    data = config.to_dict()
    data["backend_options"] = {k: ("***" if "key" in k.lower() else v) for k, v in data["backend_options"].items()}
    return data


def bigcode_config(config: RunConfig) -> dict:
    """bigcode's `config` block is its flat argument namespace; ours is the same shape."""
    recorded = recorded_config(config)
    flat = {k: v for k, v in recorded.items() if k != "generation"}
    flat.update(recorded["generation"])
    flat["tasks"] = ",".join(config.tasks)
    flat["backend"] = config.backend_kind
    return flat


def run_document(config: RunConfig, plans: Mapping[str, PlannedTask], version: str) -> dict:
    return {
        "run_id": config.run_id,
        "model": config.model,
        "backend": config.backend_kind,
        "generation": dataclasses.asdict(config.generation),
        "code_version": version,
        "codeeval_version": __version__,
        "data_fingerprints": {name: plan.fingerprint for name, plan in plans.items()},
        "config": recorded_config(config),
    }


def save_bigcode_generations(config: RunConfig, layout: artifacts.RunLayout, name: str,
                             n_shards: int) -> str:
    """`<save_generations_path stem>_<task>.json`: one list of programs per problem, the format
    --load_generations_path reads back (bigcode's --save_generations). A deployment run's relative
    path is inside its run directory already (pipeline/policy.py WorkerPolicy.anchored)."""
    problems, _ = read_problems(layout.problems(name))
    by_task: dict[str, list[tuple[int, str]]] = defaultdict(list)
    for i in range(n_shards):
        for row in artifacts.read_rows(layout.generations(name, i)):
            by_task[row["task_id"]].append((row["sample"], row["completion"]))
    data = [[c for _, c in sorted(by_task[p.task_id])] for p in problems]
    base, ext = os.path.splitext(config.save_generations_path)
    return artifacts.write_output(f"{base}_{name}{ext or '.json'}", json.dumps(data).encode())


def task_summary(plan: PlannedTask, score: Optional[TaskScore], reuse: Reuse, saved: Optional[str],
                 api: Optional[dict] = None, compute: Optional[dict] = None,
                 thinking: Optional[dict] = None) -> TaskSummary:
    """The `codeeval.tasks.<name>` block of results.json: counts, the primary metric, reuse, and what
    generating cost: through an API (`api`), on local weights (`compute`), a reasoning model's thinking
    (`thinking`; codeeval/pipeline/usage.py)."""
    counts = dict(shards=len(plan.shards), reused=Reuse(generate=reuse.generate, execute=reuse.execute,
                                                        train=reuse.train, predict=reuse.predict),
                  api=api or None, compute=compute or None, thinking=thinking or None,
                  saved_generations=saved or None)
    if score is None:
        return TaskSummary(problems=plan.n_problems, samples=plan.n_samples, ks_left_out=plan.ks_left_out, **counts)
    return TaskSummary(primary=score.primary, higher_is_better=score.higher_is_better, problems=score.problems,
                       samples=score.samples, passed=score.passed, statuses=score.statuses,
                       ks_left_out=score.ks_left_out, stderr=score.stderr, ci95=score.ci95,
                       stderr_method=score.stderr_method, **counts)


def generation_costs(layout: artifacts.RunLayout, name: str, shards: int, reuse: Reuse) -> tuple:
    """What generating the task `name` cost, through an API, on local weights and in thinking
    (pipeline/usage.py), from its shards' files."""
    paths, reused = [layout.generations(name, i) for i in range(shards)], set(reuse.generate_reused)
    return task_usage(paths, reused), task_compute(paths, reused), task_thinking(paths)


def shard_writers(layout: artifacts.RunLayout, shards: Mapping[str, int]) -> list[dict]:
    """Who wrote the run's shard files (`shards`: task -> its number of shards; core/provenance.py): one
    entry per worker, naming its shards (`humaneval/generations/shard-00000`)."""
    writers = {}
    for name, count in shards.items():
        for i in range(count):
            trained = (layout.output(ShardId(name, "train", 0)),) if i == 0 else ()
            for path in (layout.generations(name, i), layout.executions(name, i), layout.predictions(name, i), *trained):
                if (writer := artifacts.written_by(path)) is not None:
                    writers[path.relative_to(layout.root).with_suffix("").as_posix()] = writer
    return provenance.group(writers)


def shard_sandboxes(layout: artifacts.RunLayout, shards: Mapping[str, int]) -> list[dict]:
    """Where the run's execution shards ran: one entry per executor, image and runtime (runsc: gVisor),
    naming its shards, as shard_writers names the writers."""
    out: dict[tuple, dict] = {}
    for name, count in shards.items():
        for i in range(count):
            path = layout.executions(name, i)
            if (where := artifacts.read_metadata(path, artifacts.SANDBOX_FIELD)) is not None:
                entry = out.setdefault(tuple(sorted(where.items())), {**where, "shards": []})
                entry["shards"].append(path.relative_to(layout.root).with_suffix("").as_posix())
    return [out[key] for key in sorted(out, key=str)]


def publish(config: RunConfig, layout: artifacts.RunLayout, plans: Mapping[str, PlannedTask],
            scores: Mapping[str, TaskScore], reuse: Mapping[str, Reuse], version: str,
            workers: Sequence[dict] = (), sandboxes: Sequence[dict] = ()) -> RunResults:
    """`workers`: shard_writers' answer (results.json names them, and says when their code differs);
    `sandboxes`: shard_sandboxes' answer."""
    artifacts.write_json(layout.run_json, run_document(config, plans, version))
    saved = {}
    if config.save_generations or config.generation_only:
        saved = {name: save_bigcode_generations(config, layout, name, len(plan.shards))
                 for name, plan in plans.items() if not plan.trains}  # a classification task generates nothing
    results = RunResults(
        metrics={name: score.metrics for name, score in scores.items()}, config=bigcode_config(config),
        run_id=config.run_id, run_dir=str(layout.root), code_version=version, codeeval_version=__version__,
        workers=list(workers), mixed_versions=provenance.mixed(workers), sandboxes=list(sandboxes),
        tasks={name: task_summary(plan, scores.get(name), reuse[name], saved.get(name),
                                  *generation_costs(layout, name, len(plan.shards), reuse[name]))
               for name, plan in plans.items()})
    artifacts.write_json(layout.results, results.to_json())
    if config.metric_output_path:  # results.json as written, also there
        artifacts.write_output(config.metric_output_path, layout.results.read_bytes())
    return results
