"""Which worker process wrote a shard: its codeeval version, the fingerprint of its code
(fingerprint.code_version), its host and home. Every shard file carries it in its Parquet metadata
(artifacts.write_table), so that a run says when its shards come from workers at different versions,
and a worker never takes for its own a shard that other code wrote: the shard's cache key is the
evaluate run's, made by the process that planned the run, not by the worker that runs the shard."""
from __future__ import annotations

import socket
from pathlib import Path
from typing import Mapping, Optional, Sequence

from codeeval.core.fingerprint import code_version

WRITER = ("version", "code", "host", "home")  # what this_worker() records, in the order results.json lists it


def this_worker() -> dict:
    """This process as a shard's writer."""
    from codeeval import __version__

    return {"version": __version__, "code": code_version(), "host": socket.gethostname(), "home": str(Path.home())}


def label(worker: Optional[Mapping]) -> str:
    """`codeeval 0.1.0 (code 1a2b3c4d5e6f7a8b)`, or what a file written before versions were recorded says."""
    if not worker or not worker.get("code"):
        return "a codeeval that recorded no version"
    return f"codeeval {worker.get('version')} (code {worker['code']})"


def same_code(worker: Optional[Mapping]) -> bool:
    """Whether `worker` (a shard's recorded writer) ran this process's code."""
    return bool(worker) and worker.get("code") == code_version()


def refusal(path: str, worker: Optional[Mapping]) -> str:
    """The one line that says why a finished shard is computed again."""
    where = f" on {worker['host']}:{worker['home']}" if worker and worker.get("host") else ""
    return (f"{path} was written by {label(worker)}{where}; this worker runs {label(this_worker())}: "
            "computed again (a shard is reused only by the code that wrote it)")


def group(writers: Mapping[str, Optional[Mapping]]) -> list[dict]:
    """Shard name -> its writer, as one entry per writer (version, code, host, home) with its shards."""
    out: dict[tuple, dict] = {}
    for shard, worker in writers.items():
        fields = {k: (worker or {}).get(k) for k in WRITER}
        out.setdefault(tuple(fields.values()), {**fields, "shards": []})["shards"].append(shard)
    return [out[key] for key in sorted(out, key=lambda key: tuple(map(str, key)))]


def mixed(workers: Sequence[Mapping]) -> Optional[str]:
    """One line when the shards of a run come from more than one version of codeeval's code, each
    named with its shard count and hosts; None when they all come from one."""
    codes: dict[str, dict] = {}
    for w in workers:
        entry = codes.setdefault(label(w), {"shards": 0, "where": []})
        entry["shards"] += len(w["shards"])
        if w.get("host"):
            entry["where"].append(f"{w['host']}:{w['home']}")
    if len(codes) < 2:
        return None
    parts = [f"{name}: {e['shards']} shard{'s' * (e['shards'] != 1)}" + (f" on {', '.join(e['where'])}" if e["where"]
                                                                          else "")
             for name, e in sorted(codes.items())]
    return f"shards come from workers at {len(codes)} code versions: " + "; ".join(parts)
