# Look for the host's environment: our own, PID 1's, every process's, the files that
# might hold it. The test puts CODEEVAL_CANARY_SECRET into the host process's environment.
import os

found = [k for k in os.environ if "CANARY" in k]
for pid in os.listdir("/proc"):
    if pid.isdigit():
        try:
            with open(f"/proc/{pid}/environ", "rb") as fh:
                if b"CODEEVAL_CANARY" in fh.read():
                    found.append(pid)
        except OSError:
            pass
for path in ("/proc/1/cmdline", "/etc/environment", "/root/.bashrc"):
    try:
        if b"CODEEVAL_CANARY" in open(path, "rb").read():
            found.append(path)
    except OSError:
        pass
print("found", found)
assert found, "no host environment"
