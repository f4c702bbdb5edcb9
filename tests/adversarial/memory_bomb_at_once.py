# Memory bomb, at once: ask for 64 GiB in one allocation (RLIMIT_AS refuses it).
block = b"x" * (64 * 1024 ** 3)
print(len(block))
