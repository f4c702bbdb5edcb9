# A detached daemon: double fork + setsid escapes the process group; the daemon
# lives on to tamper with the next program's scratch space.
import os
import time

if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        for _ in range(100):
            time.sleep(0.1)
            try:
                with open("/tmp/codeeval-pwned", "w") as fh:
                    fh.write("daemon was here")
            except OSError:
                pass
        os._exit(0)
    os._exit(0)
time.sleep(0.2)
assert False, "the tests fail; the daemon is what matters"
