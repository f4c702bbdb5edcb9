"""The OpenAI-compatible HTTP backend: its client, pacing and request journal (standard library only)."""
