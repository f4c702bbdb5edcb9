# Output flood: write to stdout and stderr without end (RLIMIT_FSIZE caps the
# captured files, the tmpfs caps the scratch space, only a tail is kept).
import sys

line = "flood " * 10000 + "\n"
while True:
    sys.stdout.write(line)
    sys.stderr.write(line)
