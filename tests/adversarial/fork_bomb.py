# Fork bomb: every process forks forever. Contained by RLIMIT_NPROC (per-slot uid) and
# --pids-limit; killed at the wall timeout with its whole process group.
import os

while True:
    try:
        os.fork()
    except OSError:
        pass
