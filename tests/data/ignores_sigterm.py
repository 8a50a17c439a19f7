"""Targets that take SIGTERM for themselves (run only in a subprocess)."""

import signal
import time

signal.signal(signal.SIGTERM, signal.SIG_IGN)


def slow(x):
    signal.signal(signal.SIGTERM, lambda *args: None)  # again, while it runs
    time.sleep(60)
    return x * 2
