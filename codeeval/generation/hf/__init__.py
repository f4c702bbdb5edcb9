"""The transformers backend: its decoders, prefill, sampling, prompt lookup, compiled-step store and device planning."""
