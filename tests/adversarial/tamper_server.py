# Tamper with the sandbox itself: overwrite the server and runner scripts, write into
# the image, read the server's memory (ptrace-like access to PID 1).

hits = []
for path in ("/opt/codeeval/docker_server.py", "/opt/codeeval/runner.py", "/etc/passwd", "/usr/bin/python3"):
    try:
        with open(path, "a") as fh:
            fh.write("# pwned\n")
        hits.append(path)
    except OSError:
        pass
for path in ("/proc/1/mem", "/proc/1/environ", "/proc/1/fd/0"):
    try:
        with open(path, "rb") as fh:
            fh.read(1)
        hits.append(path)
    except OSError:
        pass
assert hits, "the sandbox could not be touched"
