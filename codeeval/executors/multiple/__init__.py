"""MultiPL-E's per-language runners (languages.py) and the harness they run in the container (harness.py)."""
