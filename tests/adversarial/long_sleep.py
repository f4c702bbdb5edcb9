# Long sleep: uses no CPU, so only the clock limit (wall time less CPU waits) ends it.
import time

time.sleep(3600)
