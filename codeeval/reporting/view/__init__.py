"""`codeeval view`: a run's samples (or two runs' side by side) as a static site (docs/viewer.md)."""
