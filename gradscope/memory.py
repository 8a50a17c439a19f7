"""Memory the process holds but no longer uses, handed back between the stages of a run.

glibc's malloc keeps freed blocks below its mmap threshold in its heap, and the threshold
rises to the largest block freed (up to 32 MB): a model's parameter-sized temporaries — each
stage's gradients, masks and perturbed copies — then stay in the process's resident memory
after they are freed, and the next stage's peak stacks on top of them (on GPT-2 small about
0.4 GB, 3 bytes per parameter). `released()` asks malloc to return what is free
(`malloc_trim(0)`, a few milliseconds); elsewhere (macOS, musl, Windows) it does nothing."""

from __future__ import annotations

import ctypes
import ctypes.util
import sys
from functools import cache
from typing import Any


@cache
def _trim() -> Any:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return libc.malloc_trim
    except (OSError, AttributeError):  # not glibc (musl has no malloc_trim)
        return None


def released() -> bool:
    """Free heap memory handed back to the system; whether it could be asked."""
    trim = _trim()
    if trim is None:
        return False
    trim(0)
    return True
