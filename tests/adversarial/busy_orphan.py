# A CPU-burning orphan: a child forks a grandchild and exits, the grandchild leaves the
# session (setsid, reparented to the sandbox's PID 1) and burns CPU, while the program
# itself sleeps (uses no CPU). The CPU limit counts the whole tree, orphans included: this
# must stop at the CPU limit, not run on to the wall-clock backstop.
import os
import time

if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        while True:
            pass
    os._exit(0)
os.wait()
time.sleep(3600)
