"""codeeval: evaluate code language models on the standard code benchmarks."""

__version__ = "0.1.0"

import os as _os

# before torch loads its OpenMP runtime: threads that spin while waiting made CPU generation
# 6-8x slower on a shared machine (docs/generation.md)
_os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
