"""Give the C heap's free memory back to the operating system after a scene change.

Loading a scene frees the previous one's MuJoCo model, data, scratch copies and rendering buffers (megabytes each)
and allocates the new ones; an episode then churns through image buffers and ROS messages. In a process whose calls
run on several threads (sim_stack: a MultiThreadedExecutor of six), glibc serves each thread from an arena of its
own and, once a large block has been freed, raises its mmap threshold so that later blocks of that size come from
the arenas instead of fresh mappings. The freed memory then stays resident, scattered over the arenas, and is not
reused by the next scene's allocations on another thread: sim_stack grew by 141-170 MB over 100 task scenes
(bench/bench_scene_memory.py --stack) and by 20-30 MB per episode of a benchmark, with no Python object or MuJoCo
model of an earlier scene left alive.
`malloc_trim(0)` hands every arena's free pages back (it also releases free pages inside the heap, not only at its
top). Elsewhere than glibc this does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
from collections.abc import Callable

_malloc_trim: Callable[[int], int] | None = None
try:
    _libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    _malloc_trim = _libc.malloc_trim
    _malloc_trim.argtypes = [ctypes.c_size_t]
    _malloc_trim.restype = ctypes.c_int
except (OSError, AttributeError):  # not glibc (musl, macOS): no arenas to trim this way
    _malloc_trim = None


def release_free_memory() -> bool:
    """Return the free pages of every malloc arena to the operating system; False where that is not available
    (not glibc). A few milliseconds; call it after large blocks were freed (a scene change), not per frame."""
    if _malloc_trim is None:
        return False
    _malloc_trim(0)
    return True
