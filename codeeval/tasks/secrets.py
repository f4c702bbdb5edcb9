"""Secrets a shard needs, fetched where it runs, never carried in its parameters.

A deployment run's parameters are stored by the server in clear text, so an API key may not be
one (pipeline/policy.py refuses it). The openai backend takes its key from the worker's
environment (OPENAI_API_KEY), or from the Prefect Secret block that `backend_options.api_key_block`
names: the block's value is read here, in the shard's own process, and lives only in its memory.
"""
from __future__ import annotations

from dataclasses import replace

from codeeval.generation import BackendSpec
from codeeval.generation.options import API_KEY_BLOCK as BLOCK_OPTION


def with_secrets(spec: BackendSpec) -> BackendSpec:
    """`spec` with the Secret block it names read into its `api_key` option (in memory only)."""
    options = dict(spec.options)
    block = options.pop(BLOCK_OPTION, None)
    if not block:
        return spec
    from prefect.blocks.system import Secret

    options["api_key"] = str(Secret.load(block).get())
    return replace(spec, options=tuple(sorted(options.items())))
