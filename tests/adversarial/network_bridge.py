# Network to the docker bridge (the host's side of docker0) and the engine's TCP ports.
import socket

for host in ("172.17.0.1", "172.18.0.1", "192.168.0.1", "10.0.0.1"):
    for port in (2375, 2376, 22, 80, 443):
        try:
            socket.create_connection((host, port), timeout=0.3).close()
        except OSError:
            continue
        print("reached", host, port)
        raise SystemExit  # never reached with --network none
assert False, "no route to the bridge"
