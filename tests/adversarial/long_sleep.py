# Long sleep: uses no CPU, so only the wall-clock backstop ends it.
import time

time.sleep(3600)
