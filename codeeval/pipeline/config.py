"""RunConfig: everything one evaluation run depends on; the flow's single parameter."""
from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Mapping, Optional

from pydantic import Field

from codeeval.core.fingerprint import digest
from codeeval.generation.base import GenerationArgs
from codeeval.training.args import TrainArgs


SECRET_HOME = ("in the worker's environment (OPENAI_API_KEY) or in a Prefect Secret block named by "
               "backend_options.api_key_block")
# The server checks a deployment run's parameters against this schema before it stores them: an API
# key is refused there, so no key ever reaches its database (its message is the `const`).
BackendOptions = Annotated[dict[str, str], Field(json_schema_extra={"properties": {"api_key": {
    "const": f"an API key is never a deployment parameter (the server would keep it in clear text): it belongs "
             f"{SECRET_HOME}"}}})]


@dataclass(frozen=True)
class RunConfig:
    model: str
    tasks: list[str]
    generation: GenerationArgs = field(default_factory=GenerationArgs)
    backend: str = ""  # "" = inferred: reference / replay / transformers
    backend_options: BackendOptions = field(default_factory=dict)
    limit: Optional[int] = None
    limit_start: int = 0
    k: Optional[list[int]] = None  # None = each task's default ks, those above n left out
    allow_code_execution: bool = False
    generation_only: bool = False
    load_generations_path: Optional[str] = None
    save_generations: bool = False
    save_generations_path: str = "generations.json"
    metric_output_path: Optional[str] = None
    output_dir: Optional[str] = None  # default runs/<run_id>
    data_dir: Optional[str] = None
    executor: str = "docker"
    # the OCI runtime of the sandbox's containers (runsc: gVisor); "" = the worker's
    # CODEEVAL_SANDBOX_RUNTIME, else the engine's default (codeeval/executors/docker/runtimes.py)
    sandbox_runtime: str = ""
    n_workers: int = 0  # 0 = core count
    memory_mb: int = 4096
    shard_size: int = 64  # problems per shard
    # programs per shard, at most (whole problems; one problem may hold more): what a shard holds
    # in memory is bounded by this, not by n_samples (docs/reliability.md, "Scale")
    shard_programs: int = 1024
    infra_retries: int = 2  # retries of a shard that an infrastructure error failed (never a model error)
    retry_delay_s: float = 10.0
    # where shards run: "local" (this process), "deployments" (flow runs of the generate-shard /
    # execute-shard deployments on the gpu / cpu work pools), "auto" (deployments when this run
    # came from a deployment and they exist; codeeval/flows/remote.py)
    stages: str = "auto"
    # repo-level tasks (LoadOptions): the Source_Code and Dependency_Data trees, and whether the
    # ground truths run first so that the tasks they fail are left out of the score
    source_code_root: Optional[str] = None
    dependency_data_root: Optional[str] = None
    exclude_failing_oracles: bool = False
    strict_data: bool = False  # APPS: a malformed input_output is an error, not a -2 (LoadOptions)
    # the classification tasks' fine-tuning (bigcode's finetuning/*/train.py flags; codeeval/training/args.py)
    training: TrainArgs = field(default_factory=TrainArgs)

    @property
    def backend_kind(self) -> str:
        if self.backend:
            return self.backend
        if self.load_generations_path:
            return "replay"
        return "reference" if self.model == "reference" else "transformers"

    @property
    def run_key(self) -> str:
        """The digest of what the run's outputs depend on (its id ends with it)."""
        return digest(self.model, sorted(self.tasks), self.generation, self.backend_kind, self.backend_options,
                      self.limit, self.limit_start, self.load_generations_path,
                      *([True] if self.exclude_failing_oracles else []),
                      *([self.training] if self.training != TrainArgs() else []))

    @property
    def run_id(self) -> str:
        """Same inputs, same id: a repeated command reuses its run directory and shards."""
        slug = re.sub(r"[^A-Za-z0-9._-]+", "_", Path(self.model).name or self.model)[:40]
        return f"{slug}-{self.run_key[:10]}"

    @property
    def run_dir(self) -> Path:
        """--output_dir, else <run_id> under the storage root (core/storage.py's ``root``)."""
        from codeeval.core import storage

        return self.dir_under(storage.root())

    def dir_under(self, root: Path) -> Path:
        """Where the run lives with ``root`` as the storage root: its output_dir, else root/<run_id>."""
        return Path(self.output_dir) if self.output_dir else root / self.run_id

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "RunConfig":
        """to_dict's inverse: a flow run's parameters, a models file's entry (`generation` and `training`:
        mappings of GenerationArgs and TrainArgs fields, or missing for their defaults)."""
        generation, training = data.get("generation") or {}, data.get("training") or {}
        if not isinstance(generation, GenerationArgs):
            generation = GenerationArgs(**generation)
        if not isinstance(training, TrainArgs):
            training = TrainArgs(**training)
        return cls(**{**data, "generation": generation, "training": training})
