"""A target whose module registers an atexit handler (as coverage does): it writes the file
named by GRADSCOPE_TEST_ATEXIT when the interpreter ends normally."""

import atexit
import os

import torch


def _write() -> None:
    path = os.environ.get("GRADSCOPE_TEST_ATEXIT")
    if path:
        with open(path, "w") as handle:
            handle.write("ran")


atexit.register(_write)


def f(x):
    return torch.sin(x)
