"""Targets that attack the process running them: exit, crash, hang, print, allocate."""

import ctypes
import os
import sys
import time


def exits(x):
    sys.exit(0)


def hard_exit(x):
    os._exit(0)


def segfault(x):
    ctypes.string_at(0)


def hangs(x):
    time.sleep(3600)


def prints(x):
    print("noise on stdout")
    return x * 2


def square(x):
    return x * x


def recurses(x):
    return recurses(x)


def allocates(x):
    import torch

    torch.empty(1 << 31, dtype=torch.float64)  # 16 GB of address space (never touched)
    return x * 2


def leaves_a_thread(x):
    import threading

    threading.Thread(target=time.sleep, args=(3600,)).start()  # not a daemon: never ends
    return x * 2
