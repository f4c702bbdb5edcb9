# Memory bomb, gradual: touch 16 MiB more at a time until something stops it
# (RLIMIT_AS, or the container's --memory cgroup limit).
chunks = []
while True:
    chunks.append(b"x" * (16 * 1024 ** 2))
