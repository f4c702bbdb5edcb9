# Fork bomb: every process forks forever. Contained by the container's --pids-limit (not
# RLIMIT_NPROC, which is per uid host-wide); killed at the CPU limit with its whole
# process group and kill(-1).
import os

while True:
    try:
        os.fork()
    except OSError:
        pass
