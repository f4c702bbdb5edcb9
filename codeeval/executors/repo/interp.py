"""What the interpreter that runs a repository's tests is: its version (the environment's
site-packages folder is named after it) and its own standard-library module names
(`sys.stdlib_module_names`), asked of it once per image and cached: a requirement or an
installed top-level module of that name is a backport the interpreter does not need."""
from __future__ import annotations

import json
import shutil
import uuid

from codeeval.core.cache import cache_root

ASK = ("import json, sys; json.dump({'version': '%d.%d' % sys.version_info[:2], "
       "'stdlib': sorted(sys.stdlib_module_names)}, open('/out/interp.json', 'w'))")


class InterpreterError(RuntimeError):
    pass


def interpreter(runner) -> dict:
    """{"version": "3.11", "stdlib": [...]} of the runner's python3 (the image's, or the host's)."""
    cached = cache_root() / "repo-interp" / f"{(runner.image or 'local').replace('/', '_').replace(':', '_')}.json"
    if runner.kind != "local" and cached.is_file():
        return json.loads(cached.read_text())
    work = cache_root() / "tmp" / f"interp-{uuid.uuid4().hex[:8]}"
    work.mkdir(parents=True)
    work.chmod(0o777)
    try:
        run = runner.tool(["python3", "-c", ASK], {"/out": (work, True)}, 60.0)
        if run.exit_code != 0 or not (work / "interp.json").is_file():
            raise InterpreterError(f"could not ask the test interpreter for its stdlib (exit {run.exit_code}): "
                                   f"{run.output.strip().splitlines()[-1:] or ''}")
        info = json.loads((work / "interp.json").read_text())
    finally:
        shutil.rmtree(work, ignore_errors=True)
    cached.parent.mkdir(parents=True, exist_ok=True)
    tmp = cached.with_suffix(f".{uuid.uuid4().hex[:6]}")
    tmp.write_text(json.dumps(info))
    tmp.replace(cached)
    return info
