"""Room for the worker threads under an address-space limit (`ulimit -v`, RLIMIT_AS).

A limit on address space counts what is reserved, not what is used: glibc gives each thread that
allocates a malloc arena of its own (64 MB reserved each, up to 8 per core), and each thread a
stack of `ulimit -s` (8 MB by default). At `concurrency = 64` that reserves about 1.5 GB while
the process uses 60 MB, and the threads fail to start ("can't start new thread") under a 1 GB
`ulimit -v`. When such a limit is set, and only then, `fit()` gives new threads a 1 MB stack
(ample for an HTTP request: the workers recurse little) and caps glibc's arenas at 2
(`mallopt(M_ARENA_MAX)`; elsewhere nothing happens). Memory used is the same either way.
"""

from __future__ import annotations

import logging
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
    if not limited():
        return
    threading.stack_size(THREAD_STACK)
    try:
        import ctypes  # lazy: only under an address-space limit

        ctypes.CDLL(None).mallopt(_M_ARENA_MAX, ARENAS)
    except (OSError, AttributeError) as e:  # not glibc: its allocator reserves less
        log.debug("mallopt unavailable: %s", e)
    log.debug("address space limited: thread stacks of %d KB, %d malloc arenas", THREAD_STACK >> 10, ARENAS)
