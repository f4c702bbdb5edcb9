"""Where a model comes from: a directory, a GGUF file, a hub id, the SmolLM2 file from PyPI."""
