"""The repository-level family (EvoCodeBench, DevEval): its tasks (family.py), prompts and
sources, post-processing, execution under the repository's lock, and dependency recall."""
