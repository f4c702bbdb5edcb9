"""`docker run` flags -> the Docker SDK's `containers.create` arguments.

The sandbox's lock-down is written, documented (docs/security.md) and adjusted in the `docker
run` vocabulary everyone can read and paste into a shell; this turns the subset we use into the
Engine API's create body, and refuses any other flag (a silent drop would loosen the sandbox).
"""
from __future__ import annotations

from typing import Sequence

import docker.types

_UNITS = {"b": 1, "k": 1024, "m": 1024 ** 2, "g": 1024 ** 3}


def _bytes(size: str) -> int:
    size = size.strip().lower()
    if size[-1:] in _UNITS:
        return int(float(size[:-1]) * _UNITS[size[-1]])
    return int(size)


def _ulimit(spec: str) -> docker.types.Ulimit:
    name, _, values = spec.partition("=")
    soft, _, hard = values.partition(":")
    return docker.types.Ulimit(name=name, soft=int(soft), hard=int(hard or soft))


def _volume(spec: str) -> tuple[str, dict]:
    source, target, *mode = spec.split(":")
    return source, {"bind": target, "mode": mode[0] if mode else "rw"}


# flag -> (part, argument of APIClient.create_container ("config") or create_host_config ("host"), conversion)
_VALUED = {
    "--network": ("host", "network_mode", str), "--shm-size": ("host", "shm_size", _bytes),
    "--pids-limit": ("host", "pids_limit", int), "--memory": ("host", "mem_limit", _bytes),
    "--memory-swap": ("host", "memswap_limit", _bytes),
    "--cpus": ("host", "nano_cpus", lambda v: int(round(float(v) * 1e9))),
    "--log-driver": ("host", "log_config", lambda v: docker.types.LogConfig(type=v)),
    "--runtime": ("host", "runtime", str),
    "--hostname": ("config", "hostname", str), "--workdir": ("config", "working_dir", str),
    "-w": ("config", "working_dir", str), "--user": ("config", "user", str), "--name": ("config", "name", str),
}
_LISTS = {"--cap-drop": ("host", "cap_drop", str), "--cap-add": ("host", "cap_add", str),
          "--security-opt": ("host", "security_opt", str),
          "--ulimit": ("host", "ulimits", _ulimit), "-e": ("config", "environment", str),
          "--env": ("config", "environment", str)}
_DICTS = {"--tmpfs": ("host", "tmpfs", lambda v: tuple(v.split(":", 1)) if ":" in v else (v, "")),
          "--label": ("config", "labels", lambda v: tuple(v.split("=", 1)) if "=" in v else (v, "")),
          "-v": ("host", "binds", _volume), "--volume": ("host", "binds", _volume)}
_SWITCHES = {"--read-only": ("host", "read_only"), "--rm": ("host", "auto_remove"), "-i": ("config", "stdin_open")}


def create_args(flags: Sequence[str]) -> tuple[dict, dict]:
    """(create_container arguments, create_host_config arguments) equivalent to `docker run FLAGS`
    (the subset the sandbox and the repo runner use). ValueError on any other flag."""
    parts: dict[str, dict] = {"config": {}, "host": {}}
    it = iter(flags)
    for flag in it:
        if flag in _SWITCHES:
            part, key = _SWITCHES[flag]
            parts[part][key] = True
            continue
        if flag not in _VALUED and flag not in _LISTS and flag not in _DICTS:
            raise ValueError(f"docker run flag {flag!r} is not supported by the sandbox's engine client")
        try:
            value = next(it)
        except StopIteration:
            raise ValueError(f"docker run flag {flag!r} needs a value") from None
        if flag in _VALUED:
            part, key, convert = _VALUED[flag]
            parts[part][key] = convert(value)
        elif flag in _LISTS:
            part, key, convert = _LISTS[flag]
            parts[part].setdefault(key, []).append(convert(value))
        else:
            part, key, convert = _DICTS[flag]
            k, v = convert(value)
            parts[part].setdefault(key, {})[k] = v
    if "binds" in parts["host"]:  # the mount points are declared in the config too
        parts["config"]["volumes"] = [b["bind"] for b in parts["host"]["binds"].values()]
    return parts["config"], parts["host"]
