"""Memory of the worker threads: glibc's malloc arenas, and room for the threads under an
address-space limit (`ulimit -v`, RLIMIT_AS).

glibc gives each thread that allocates an arena of its own (up to 8 per core, 64 MB of address
space reserved each), and memory freed in one arena stays there: at `concurrency = 64` a long
stage's resident memory grows by the fragments its workers leave (about 12 MB over 50,000
questions) although what it keeps does not grow. `fit()`, called once before the first worker
pool starts, caps the arenas at 2 (`mallopt(M_ARENA_MAX)`, what `MALLOC_ARENA_MAX=2` does; a
`MALLOC_ARENA_MAX` already in the environment is left to rule; elsewhere than glibc nothing
happens): the workers spend their time waiting on the network, so two arenas are no bottleneck.
glibc fixes its arena count when a second thread first needs an arena, so the command line calls
`fit()` before it starts any thread (cli/context.AppContext.start_work); the work queue calls it
too, for the flows run without the command line (a no-op the second time).

Under an address-space limit, new threads also get a 1 MB stack instead of `ulimit -s` (8 MB):
64 stacks of 8 MB and 16 arenas reserve about 1.5 GB for a process that uses 60 MB, and the
threads then fail to start ("can't start new thread") under a 1 GB `ulimit -v`. A worker recurses
little (an HTTP request, a JSON document): 1 MB is ample.
"""

from __future__ import annotations

import ctypes
import logging
import os
import resource
import threading

log = logging.getLogger(__name__)

THREAD_STACK = 1 << 20
ARENAS = 2
_M_ARENA_MAX = -8  # glibc's mallopt parameter
_done = False


def limited() -> bool:
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    return soft != resource.RLIM_INFINITY


def fit() -> None:
    """Once per process, before the worker threads start: see the module docstring."""
    global _done
    if _done:
        return
    _done = True
    if limited():
        threading.stack_size(THREAD_STACK)
        log.debug("address space limited: thread stacks of %d KB", THREAD_STACK >> 10)
    if "MALLOC_ARENA_MAX" in os.environ:
        return
    try:
        ctypes.CDLL(None).mallopt(_M_ARENA_MAX, ARENAS)
    except (OSError, AttributeError) as e:  # not glibc
        log.debug("mallopt unavailable: %s", e)
