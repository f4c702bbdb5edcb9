"""The `replay` backend (backend.py): saved generations streamed from a file and spilled to
Parquet, so a large generations file is never held whole."""
