"""codeeval: evaluate code language models on the standard code benchmarks."""

__version__ = "0.1.0"
