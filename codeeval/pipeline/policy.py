"""What a run that comes from a deployment may do on this worker: the worker decides, not the caller.

Whoever reaches the team server can start a deployment run with any parameters, and the worker
runs them on its host. So before anything executes, a deployment run is held against the
worker's own environment (docs/security.md, "Team server"):

  CODEEVAL_WORKER_ALLOW         what this worker allows by name, comma-separated (default: none)
      local-executor            a sandbox other than docker: model output runs on the host
      trust-remote-code         Python from the model's repository
      any-path                  paths outside the roots below
      over-caps                 memory, worker counts and program limits over the caps below
  CODEEVAL_STORAGE              the root that runs write under (codeeval/core/storage.py; without
                                it, runs/ in the worker's directory, and no other output path); a
                                relative output_dir lands under it, a relative metric_output_path or
                                save_generations_path inside the run's own directory
  CODEEVAL_DATA_ROOTS           directories a run may read (data, saved generations, local models,
                                Source_Code), separated by ':'; the storage root is readable too
  CODEEVAL_WORKER_MAX_WORKERS   sandbox workers a run may ask for (default: the host's cores)
  CODEEVAL_WORKER_MAX_MEMORY_MB memory per program (default: Limits' default)
  CODEEVAL_WORKER_REQUIRE_RUNTIME the sandbox runtime every shard must run under (runsc: gVisor), whatever
                                the run asks (default: none); CODEEVAL_SANDBOX_RUNTIME is the default
                                for runs that name none (executors/docker/runtimes.py)

Never allowed in a deployment run: `..` in a name or path, and an API key as a parameter (it
would be stored in the server's database in clear text: it belongs in the worker's environment
or a Prefect Secret block). `codeeval run` on one's own machine is not a deployment run: it keeps
every option. Pure functions over the request and the environment; the flows call `refusals`.
"""
from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Optional

from codeeval.core import storage
from codeeval.executors import SandboxSpec
from codeeval.executors.base import Limits
from codeeval.executors.docker import runtimes
from codeeval.generation import LOADS_WEIGHTS, BackendSpec
from codeeval.pipeline.config import SECRET_HOME, RunConfig

ALLOW_ENV = "CODEEVAL_WORKER_ALLOW"
DATA_ROOTS_ENV = "CODEEVAL_DATA_ROOTS"
MAX_WORKERS_ENV = "CODEEVAL_WORKER_MAX_WORKERS"
MAX_MEMORY_ENV = "CODEEVAL_WORKER_MAX_MEMORY_MB"
SECRET_OPTIONS = ("api_key",)  # backend options that hold a secret


@dataclass(frozen=True)
class Request:
    """What a run asks of the worker, whatever flow it comes to."""
    executor: str = "docker"
    trust_remote_code: bool = False
    reads: Mapping[str, str] = field(default_factory=dict)  # parameter -> path it reads
    writes: Mapping[str, str] = field(default_factory=dict)  # parameter -> path it writes
    names: Mapping[str, str] = field(default_factory=dict)  # parameter -> a name that becomes a path
    n_workers: int = 0
    limits: Limits = Limits()
    container_runtime: str = ""  # the sandbox runtime the run names ("": the worker's default)
    runs_code: bool = True  # whether it runs programs at all (a generation shard does not)
    options: Mapping[str, str] = field(default_factory=dict)  # backend options


@dataclass(frozen=True)
class WorkerPolicy:
    allow: frozenset
    storage_root: Path  # where this worker's runs write; a relative output path lands under it
    data_roots: tuple
    max_workers: int
    max_memory_mb: int
    required_runtime: str = ""  # runtimes.REQUIRE_ENV
    default_runtime: str = ""  # runtimes.RUNTIME_ENV

    @classmethod
    def from_env(cls, env: Optional[Mapping[str, str]] = None) -> "WorkerPolicy":
        env = os.environ if env is None else env
        allow = frozenset(a.strip() for a in env.get(ALLOW_ENV, "").split(",") if a.strip())
        root = storage.root(env)
        roots = tuple(_real(Path(p)) for p in env.get(DATA_ROOTS_ENV, "").split(":") if p.strip())
        return cls(allow, _real(root), roots,
                   int(env.get(MAX_WORKERS_ENV) or os.cpu_count() or 1),
                   int(env.get(MAX_MEMORY_ENV) or Limits().memory_mb), runtimes.required(env), runtimes.chosen("", env))

    def output(self, path: Optional[str], base: Optional[Path] = None) -> Optional[str]:
        """An output path of a deployment run: a relative one is taken under `base`, else the storage
        root; an absolute one or a URL is the caller's own choice, kept as given."""
        if not path or "://" in path or Path(path).is_absolute():
            return path
        return str((base or self.storage_root) / path)

    def anchored(self, config: RunConfig) -> RunConfig:
        """`config` with its relative output_dir under the storage root, and its relative
        metric_output_path and save_generations_path inside the run's own directory: the storage
        root is every run's, so two runs that both save `generations.json` would overwrite each other."""
        config = dataclasses.replace(config, output_dir=self.output(config.output_dir))
        run_dir = config.dir_under(self.storage_root)
        return dataclasses.replace(config, metric_output_path=self.output(config.metric_output_path, run_dir),
                                   save_generations_path=self.output(config.save_generations_path, run_dir))

    def refusals(self, request: Request) -> list[str]:
        """One phrase per thing this worker refuses (empty: the run may go on)."""
        out = []
        for name in request.options:
            if name in SECRET_OPTIONS:
                out.append(f"backend_options.{name}: an API key is never a parameter (the server would keep it in "
                           f"clear text); it belongs {SECRET_HOME}")
        if request.executor != "docker" and "local-executor" not in self.allow:
            out.append(f"executor {request.executor!r} runs model output outside the Docker sandbox "
                       "(allow: local-executor)")
        actual = runtimes.effective(request.container_runtime or self.default_runtime, request.executor)
        if request.runs_code and (line := runtimes.refusal(actual, self.required_runtime)):
            out.append(line)
        if request.trust_remote_code and "trust-remote-code" not in self.allow:
            out.append("trust_remote_code runs the model repository's Python on this host (allow: trust-remote-code)")
        for key, value in request.names.items():
            if ".." in Path(value).parts or "/" in value or "\\" in value:
                out.append(f"{key} {value!r} would become a path outside its directory")
        climbing = {key: value for key, value in {**request.reads, **request.writes}.items()
                    if ".." in Path(value).parts}
        out += [f"{key} {value!r} climbs out of its directory with '..'" for key, value in climbing.items()]
        if "any-path" not in self.allow:
            readable = (self.storage_root, *self.data_roots)
            for key, value in request.reads.items():
                if key not in climbing and not _under(value, readable):
                    out.append(f"{key} {value!r} is outside this worker's data roots ({DATA_ROOTS_ENV}: "
                               f"{':'.join(map(str, self.data_roots)) or 'none'}) (allow: any-path)")
            for key, value in request.writes.items():
                if key not in climbing and not _under(value, (self.storage_root,)):
                    out.append(f"{key} {value!r} is outside this worker's storage ({self.storage_root}) "
                               "(allow: any-path)")
        if "over-caps" not in self.allow:
            out += self._over_caps(request)
        return out

    def _over_caps(self, request: Request) -> list[str]:
        out = []
        if request.n_workers > self.max_workers:  # 0: the host's own default
            out.append(f"n_workers {request.n_workers} is over this worker's cap of {self.max_workers} "
                       f"({MAX_WORKERS_ENV}) (allow: over-caps)")
        if request.limits.memory_mb > self.max_memory_mb:
            out.append(f"memory_mb {request.limits.memory_mb} is over this worker's cap of {self.max_memory_mb} "
                       f"({MAX_MEMORY_ENV}) (allow: over-caps)")
        default = Limits()
        for f in dataclasses.fields(Limits):
            if f.name != "memory_mb" and getattr(request.limits, f.name) > getattr(default, f.name):
                out.append(f"limits.{f.name} {getattr(request.limits, f.name)} is over the default "
                           f"{getattr(default, f.name)} (allow: over-caps)")
        return out


def _real(path: Path) -> Path:
    """The path with every link resolved (a link inside a root that points outside is outside)."""
    return Path(os.path.realpath(path.expanduser()))


def _under(value: str, roots) -> bool:
    if "://" in value:
        return False
    real = _real(Path(value))
    return any(real == root or root in real.parents for root in roots)


def _model_path(model: str) -> Optional[str]:
    """The model as a local path, when it is one (a hub id `org/name` is not)."""
    looks_local = model.startswith(("/", ".", "~")) or Path(model).exists()
    return model if looks_local else None


def config_request(config: RunConfig) -> Request:
    """An `evaluate` run's request."""
    reads = {"data_dir": config.data_dir, "load_generations_path": config.load_generations_path,
             "source_code_root": config.source_code_root, "dependency_data_root": config.dependency_data_root,
             "model": _model_path(config.model) if config.backend_kind in LOADS_WEIGHTS else None}
    writes = {"output_dir": config.output_dir,
              "metric_output_path": config.metric_output_path,
              "save_generations_path": config.save_generations_path
              if config.save_generations or config.generation_only else None}
    names = {f"tasks[{i}]": t for i, t in enumerate(config.tasks)}
    if ".." in config.model.split("/") or ".." in config.model.split("\\"):
        names["model"] = config.model
    return Request(executor=config.executor, container_runtime=config.sandbox_runtime,
                   runs_code=not config.generation_only, trust_remote_code=config.generation.trust_remote_code,
                   reads={k: v for k, v in reads.items() if v}, writes={k: v for k, v in writes.items() if v},
                   names=names, n_workers=config.n_workers, limits=Limits(memory_mb=config.memory_mb),
                   options=dict(config.backend_options))


def shard_request(paths: Mapping[str, str], backend: Optional[BackendSpec] = None,
                  sandbox: Optional[SandboxSpec] = None, name: str = "") -> Request:
    """A shard run's request: its run-directory files (read and written under the storage), its
    backend or its sandbox."""
    reads = {k: v for k, v in paths.items() if k != "out_path" and v}
    request = Request(reads=reads, writes={"out_path": paths["out_path"]}, names={"name": name} if name else {},
                      runs_code=sandbox is not None)
    if backend is not None:
        model = _model_path(backend.model) if backend.kind in LOADS_WEIGHTS else None
        extra = {"backend.model": model, "backend.generations_path": backend.generations_path}
        request = dataclasses.replace(request, trust_remote_code=backend.args.trust_remote_code,
                                      reads={**reads, **{k: v for k, v in extra.items() if v}},
                                      options=dict(backend.options))
    if sandbox is not None:
        request = dataclasses.replace(request, executor=sandbox.name, n_workers=sandbox.n_workers,
                                      limits=sandbox.limits, container_runtime=sandbox.container_runtime)
    return request


def nightly_request(models_file: str, output_dir: str, runs_dir: Optional[str]) -> Request:
    """A `nightly-leaderboard` run's request (runs_dir None: each model's run where evaluate's goes)."""
    writes = {"output_dir": output_dir, "runs_dir": runs_dir}
    return Request(reads={"models_file": models_file}, writes={k: v for k, v in writes.items() if v})


def refusal_line(refusals: list[str], host: str = "") -> str:
    where = f"the worker on {host}" if host else "this worker"
    return f"refused by {where} before anything ran: " + "; ".join(refusals)
