"""Kernels and graph passes for the compiled decode step: fused and thin matrix products, decode attention."""
