# Read stdin: blocks forever if the sandbox leaves it open, and must not see the
# sandbox's own protocol stream.
import sys

data = sys.stdin.read()
assert data, "stdin is empty"
print(data[:100])
