# A CPU-burning orphan: a child forks a grandchild and exits, the grandchild leaves the
# session (setsid, reparented to the sandbox's PID 1) and burns CPU, while the program
# itself sleeps (uses no CPU). The CPU limit counts the whole tree, orphans included, and the
# program's clock runs while it sleeps: this must stop at its limit, not run on to the wall-clock cap.
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
