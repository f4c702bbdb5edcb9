# Long sleep: uses no CPU, so only the wall timeout ends it.
import time

time.sleep(3600)
