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


def slow(x):
    """Seconds of work in small steps (a signal is handled between them)."""
    import torch

    y = x
    for _ in range(400):
        y = torch.sin(y) @ torch.ones(y.shape[-1], y.shape[-1], dtype=y.dtype) / y.shape[-1]
    return y.sum()


def exits_at_exit(x):
    """A failing target that asks to leave with 0 once gradscope is done."""
    import atexit

    atexit.register(os._exit, 0)
    return (x * 2).detach() + x  # autograd: 1, the derivative: 3


def forks(x):
    """The child of a fork returns into the caller's code (and would run it twice)."""
    pid = os.fork()
    if pid == 0:
        return (x * 5).sum()
    os.waitpid(pid, 0)
    return (x * 2).sum()


class OwnBaseException(BaseException):
    pass


def raises_base_exception(x):
    raise OwnBaseException("not an Exception")


def writes_fd_1(x):
    os.write(1, b"written to fd 1 behind sys.stdout\n")
    return (x * x).sum()


def changes_directory(x):
    os.chdir("/")
    return (x * x).sum()


def prints_lone_surrogate(x):
    print("a lone surrogate: \udcff")
    return (x * 2).detach().sum() + x.sum()


def empty_output(x):
    return x[:0]


def sparse_output(x):
    return (x * 2).to_sparse()


def meta_output(x):
    import torch

    return torch.empty(3, device="meta")


def rejects_far_inputs(x):
    """An ODE solver's 'underflow in dt': inputs past a bound are refused."""
    if (x.abs() > 6.5).any():
        raise ValueError("underflow in dt")
    return (x * x).sum()


class FreesSaved(__import__("torch").autograd.Function):
    """Like a checkpointing Function (openai/jukebox's): what forward saved is freed by the one
    backward its graph serves; correct, and a second backward on that graph fails."""

    @staticmethod
    def forward(ctx, x):
        ctx.input_tensors = [x.detach()]
        return x.sin()

    @staticmethod
    def backward(ctx, g):
        saved = ctx.input_tensors
        del ctx.input_tensors
        return g * saved[0].cos()


def rejects_far_rounded(x):
    """A vanishing op (round) whose target refuses inputs past a bound: the wide probes that
    show round's zero gradient hides a moving function go past it."""
    import torch

    if (x.abs() > 6.5).any():
        raise ValueError("underflow in dt")
    return torch.round(x).sum()


def probability(p):
    """bernoulli-like: a probability must stay in [0, 1] (finite differences at an edge leave
    it)."""
    import torch

    if (p < 0).any() or (p > 1).any():
        raise ValueError("probabilities must lie in [0, 1]")
    return (p * torch.log1p(p)).sum()


def _scribbled(payload: bytes) -> None:
    """`payload` written into every descriptor the process inherited beyond 0-2 (a worker's
    channel to gradscope among them)."""
    import contextlib
    import os

    for fd in range(3, 256):
        with contextlib.suppress(OSError):
            os.write(fd, payload)


def scribbles(x):
    """Junk into every inherited descriptor (a huge length, a broken pickle)."""
    _scribbled(b"\xff" * 64)
    return (x * 2).sum()


def half_message(x):
    """The start of a message of gradscope's, then nothing: a reader must not wait forever."""
    import time

    _scribbled(b"gradscope-msg\x00\x00\x00")
    time.sleep(3600)
    return x.sum()


def reads_stdin(x):
    """Reads what it inherited as stdin (a worker's jobs, once)."""
    import sys

    sys.stdin.read(64)
    return (x * 3).sum()
