# Disk fill: write 1 MiB files into every writable place until something refuses,
# then claim success if more than 1 GiB got written (the scratch tmpfs is far smaller).
import os

written = 0
chunk = b"\0" * (1024 * 1024)
for place in (os.getcwd(), "/tmp", "/dev/shm", "/", "/etc", "/opt/codeeval", "/var/tmp", "/home"):
    for i in range(2048):
        try:
            with open(os.path.join(place, f"fill-{i}"), "wb") as fh:
                fh.write(chunk)
            written += len(chunk)
        except OSError:
            break
print("written", written)
assert written > 1024 ** 3, "the disk did not fill up"
