"""A program's two limits: the CPU time of its whole process tree, and its clock.

Why CPU time: a wall-clock limit judges the same program differently on a busy and an
idle machine (a program that needs 1.8 s of CPU times out at 3 s when it gets half a
core). CPU seconds do not depend on how many processes share the CPU, so the verdict does
not either (they still depend on the CPU's speed: docs/deviations.md, row 4).

Why a clock as well: the reference harnesses limit wall time, so a program that sleeps, blocks
on I/O or waits for a child times out there. A program's clock is its wall time less its
run-queue delay, the time its threads spent runnable but waiting for a CPU
(/proc/<pid>/task/<tid>/schedstat, second field): sleeping, blocking and waiting count, as in
the reference; waiting for a CPU does not, so the clock, like the CPU time, does not depend on
the machine's load. The reference's wall-clock seconds are applied to it.

Why the whole tree: a program whose main thread waits while a thread, a child or an
orphan burns CPU must reach the limit too.

The package, one responsibility a module:
  * clocks  -- the CPU of a tree: `cgroup_clock()` (the counter of this process's cgroup,
    v1 cpuacct.usage or v2 cpu.stat usage_usec: every task in it, dead or alive, one pread a
    reading; the Docker server's container holds only it and the program's tree),
    `container_clock()` (that, else a sum over /proc), `group_clock(pgid)` (a process group,
    summed over /proc: the local sandbox, which shares its cgroup with the harness),
    `max_rate()`, the most CPU seconds a wall second can bring, `host_clock(path)` (a count the
    Docker host measures for a gVisor container: its run-queue delay, its CPU time), and
    `least_since(clock, bound)`, the lesser of two counts of the same CPU.
  * queued  -- run-queue delay: `others_queued()`, `group_queued(pgid)`, `session_queued(sid)`
    (the server's, the local sandbox's, a harness's child steps), `since(clock)`, and
    `own_clock()`, inside a program its wall time less its threads' delay; under gVisor each
    reads the delay the Docker host measured for the container (`host_queued()`, HOST_QUEUED).
  * speed   -- `slowdown()`: how much slower than the reference this machine runs Python now.
  * limits  -- `watch`, the loop that ends a program at its limits, and `wait_clocked`, a
    harness's step on its session's clock.
  * alarm   -- `Alarm`: the reference's limits that a harness applies inside the program (APPS's
    per-test alarm, EvalPlus's per-input limit, MERA's exec limit), on `own_clock`; `TimeLimit`,
    the block every such harness shares: that alarm and ITIMER_PROF on the CPU time together.
Clocks are zero-argument callables returning cumulative seconds; a caller subtracts the
reading taken before the program started.

Standalone (stdlib only, relative imports): the Docker image copies the package beside the
server (/opt/codeeval/cputime/), whose forked programs find it imported (`import cputime`); the
local sandbox's runner imports it for them from beside runner.py.
"""
from .alarm import Alarm, TimeLimit
from .clocks import Clock, cgroup_clock, container_clock, group_clock, host_clock, least_since, max_rate
from .limits import CLOCK, CPU, ENDED, MIN_POLL_S, POLL_S, WALL, wait_clocked, watch
from .queued import HOST_QUEUED, group_queued, host_queued, others_queued, own_clock, session_queued, since
from .speed import MAX_SLOWDOWN, REFERENCE_S, paused_slowdown, slowdown

__all__ = ["Alarm", "CLOCK", "CPU", "Clock", "ENDED", "HOST_QUEUED", "MAX_SLOWDOWN", "MIN_POLL_S", "POLL_S",
           "REFERENCE_S", "WALL", "cgroup_clock", "container_clock", "group_clock", "group_queued", "host_clock",
           "host_queued", "least_since", "max_rate", "others_queued", "own_clock", "paused_slowdown", "session_queued",
           "since", "slowdown", "TimeLimit", "wait_clocked", "watch"]
