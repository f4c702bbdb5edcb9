"""The static decoder (the GPU path): continuous batching over a slot cache, one captured step per decode step."""
