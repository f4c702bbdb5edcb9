# Threads spinning while the main thread waits for them: the CPU limit counts every thread.
import threading


def spin():
    while True:
        pass


threads = [threading.Thread(target=spin) for _ in range(8)]
for t in threads:
    t.start()
for t in threads:
    t.join()
