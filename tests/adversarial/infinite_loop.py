# Infinite loop: only the wall timeout (and RLIMIT_CPU) ends it.
while True:
    pass
