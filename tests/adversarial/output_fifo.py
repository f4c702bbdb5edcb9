# Replace the captured-output files with FIFOs after writing to them, so that a server
# reopening /out/stdout or /out/stderr by path to read the tails would block forever
# (and the sample would end as a sandbox error). The server reads the tails through its
# own descriptors: this is judged failed, quickly. (posix: the guard may hide os.unlink.)
import os
import posix

print("written before the swap")
for name in ("/out/stdout", "/out/stderr"):
    try:
        posix.unlink(name)
        os.mkfifo(name)
    except OSError:
        pass
assert False, "the tests fail"
