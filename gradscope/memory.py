"""Memory the process holds but no longer uses, handed back between the stages of a run.

glibc's malloc keeps freed blocks below its mmap threshold in its heap, and the threshold
rises to the largest block freed (up to 32 MB): a model's parameter-sized temporaries — each
stage's gradients, masks and perturbed copies — then stay in the process's resident memory
after they are freed, and the next stage's peak stacks on top of them (on GPT-2 small about
0.4 GB, 3 bytes per parameter). `released()` asks malloc to return what is free
(`malloc_trim(0)`) where the heap holds at least WORTH of it: below that, handing pages back
costs more than it saves (the next stage faults them in again: a million-element check took
35 ms longer trimming after every stage). Elsewhere (macOS, musl, Windows) it does nothing.

On a GPU the stages' peaks are read instead (`gpu_peak`): the report's timings carry
`gpu_peak.STAGE`, the most bytes torch's allocator had held by the end of each stage (never
reset: the user's own process keeps its peak statistics; the stage where the figure first
reaches its largest is the one that set the check's peak)."""

from __future__ import annotations

import ctypes
import ctypes.util
import sys
from functools import cache
from typing import Any

WORTH = 1 << 30  # free heap bytes worth handing back


class _Mallinfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
        "fordblks", "keepcost")]


@cache
def _libc() -> Any:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.malloc_trim, libc.mallinfo2  # noqa: B018 (glibc 2.33 and newer: both there)
    except (OSError, AttributeError):  # not glibc (musl has no malloc_trim), or an old one
        return None
    libc.mallinfo2.restype = _Mallinfo2
    return libc


def free_in_heap() -> int | None:
    """Bytes malloc holds freed in its heap (None: it does not say)."""
    libc = _libc()
    return None if libc is None else int(libc.mallinfo2().fordblks)


def released(worth: int | None = None) -> bool:
    """Free heap memory handed back to the system where there is at least `worth` of it
    (default WORTH); whether it was."""
    free = free_in_heap()
    if free is None or free < (WORTH if worth is None else worth):
        return False
    _libc().malloc_trim(0)
    return True


def gpu_peak() -> int | None:
    """The most bytes torch's CUDA allocator has held in this process; None without CUDA."""
    import torch

    if torch.cuda.is_available() and torch.cuda.is_initialized():
        return int(torch.cuda.max_memory_allocated())
    return None
