# Look for the Docker engine's socket (root on the host if found) and talk to it.
import os
import socket
import stat

candidates = ["/var/run/docker.sock", "/run/docker.sock", "/docker.sock", "/tmp/docker.sock",
              "/run/containerd/containerd.sock"]
for root, dirs, files in os.walk("/", onerror=lambda e: None):
    dirs[:] = [d for d in dirs if os.path.join(root, d) not in ("/proc", "/sys", "/usr")]
    for name in files:
        path = os.path.join(root, name)
        try:
            if stat.S_ISSOCK(os.lstat(path).st_mode):
                candidates.append(path)
        except OSError:
            pass
for path in candidates:
    try:
        s = socket.socket(socket.AF_UNIX)
        s.connect(path)
        s.sendall(b"GET /info HTTP/1.0\r\n\r\n")
        print("docker answered:", s.recv(200))
        raise SystemExit  # the socket is reachable: the attack worked
    except OSError:
        continue
assert False, "no docker socket"
