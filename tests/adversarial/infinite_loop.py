# Infinite loop: the CPU-time limit ends it (RLIMIT_CPU per process is the safety net).
while True:
    pass
