"""The repository patcher: patch a completion into a real repository, run its own tests, restore
the file (crash-safe, hash-checked), one repository at a time under its lock. Plain library code;
codeeval/benchmarks/repo/execution.py connects it to the execute stage."""
